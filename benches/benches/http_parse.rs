//! A header section trickled a byte per packet (a hostile client's cheapest way to make a
//! server work): the CPU it costs the gateway to read it with `RequestProgress` (the new
//! bytes looked at, the head parsed when its request line and then the section are whole),
//! against parsing the whole buffer again at every byte (what the gateway did before), in
//! the same run. A section of ~3,000 short lines just under 16 KiB, then a 1 KiB body.
//!
//! Run: `cargo bench -p ladder-benches --bench http_parse`.

// criterion_group! and criterion_main! make public functions that cannot carry docs.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ladder_gateway::http::{parse_request, RequestProgress, HEADER_BYTES_MAX};

/// A request whose header section holds as many 5-byte lines as fit in 16 KiB, and a body.
fn hostile_request() -> Vec<u8> {
    let mut request = b"POST /books HTTP/1.1\r\nContent-Length: 1024\r\n".to_vec();
    while request.len() + 5 + 2 <= HEADER_BYTES_MAX {
        request.extend_from_slice(b"a:b\r\n");
    }
    request.extend_from_slice(b"\r\n");
    request.extend(std::iter::repeat_n(b'x', 1024));
    request
}

fn trickled(c: &mut Criterion) {
    let request = hostile_request();
    let mut group = c.benchmark_group("header_trickle");
    group.throughput(Throughput::Bytes(request.len() as u64));
    group.sample_size(10);
    group.bench_function("progress_byte_by_byte", |b| {
        b.iter(|| {
            let mut progress = RequestProgress::default();
            for n in 1..=request.len() {
                if let Ok(Some(done)) = progress.advance(black_box(&request[..n])) {
                    return done.1;
                }
            }
            0
        })
    });
    group.bench_function("reparse_byte_by_byte_baseline", |b| {
        b.iter(|| {
            for n in 1..=request.len() {
                if let Ok(Some(done)) = parse_request(black_box(&request[..n])) {
                    return done.1;
                }
            }
            0
        })
    });
    group.bench_function("whole_request_once", |b| {
        b.iter(|| parse_request(black_box(&request)).map(|r| r.map(|d| d.1)))
    });
    group.finish();
}

criterion_group!(benches, trickled);
criterion_main!(benches);

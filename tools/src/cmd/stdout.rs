//! What the commands print for a reader (JSON lines, answers): a write to standard output
//! that fails ends the command by its own rules, never with a panic (CONTRACT 17: exit 1 and
//! a one-line reason; CONTRACT 21: no command dies on a full disk).

use std::io::Write;

/// Prints `line` and a newline to standard output. A reader that went away (`| head`) ends
/// the command at once with success: it has all it asked for. Any other failure (a full disk
/// under a redirect) ends it with exit code 1 and the reason on standard error.
pub fn print_line(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        print_error(format_args!("ladder: standard output: {e}"));
        std::process::exit(1);
    }
}

/// Prints a running service's notice (where it listens, the demo's accounts) to standard
/// output. A service never stops for its standard output: a notice that cannot be written
/// (a full disk under a redirect, a reader gone) is dropped, and said once on standard error.
pub fn print_notice(line: impl std::fmt::Display) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            print_error(format_args!(
                "ladder: standard output: {e} (notices are dropped; the service runs on)"
            ));
        }
    }
}

/// Prints `line` and a newline to standard error, where a failure (a full disk under a
/// redirect) is ignored: nothing is left to tell it to (`eprintln!` would panic).
pub fn print_error(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

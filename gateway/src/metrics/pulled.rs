//! Metrics whose values live elsewhere (the sequencer's and the server's counters, the
//! rings, `/proc`) and are read at each scrape: a [`Collector`] per family, so that nothing
//! on a request's path updates them.

use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};

/// One sample: its label values (in the order the family declares its labels) and value.
pub type Sample = (Vec<String>, f64);

/// Reads a family's samples; none when its source is not there (the family is left out).
pub type ReadSamples = Box<dyn Fn() -> Vec<Sample> + Send + Sync>;

/// A histogram as read: cumulative counts by upper bound (`+Inf` excluded), sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSample {
    /// `(upper bound, observations at or below it)`, bounds ascending.
    pub cumulative: Vec<(f64, u64)>,
    /// Sum of the observations.
    pub sum: f64,
    /// Observations.
    pub count: u64,
}

/// Reads a histogram; `None` when its source is not there.
pub type ReadHistogram = Box<dyn Fn() -> Option<HistogramSample> + Send + Sync>;

/// What a pulled family reads.
enum Source {
    Values(MetricType, ReadSamples),
    Histogram(ReadHistogram),
}

/// A metric family read at each scrape.
pub struct Pulled {
    desc: Desc,
    source: Source,
}

impl std::fmt::Debug for Pulled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pulled")
            .field("name", &self.desc.fq_name)
            .finish()
    }
}

impl Pulled {
    /// A counter family with `labels`.
    pub fn counter(name: &str, help: &str, labels: &[&str], read: ReadSamples) -> Pulled {
        Pulled::values(MetricType::COUNTER, name, help, labels, read)
    }

    /// A gauge family with `labels`.
    pub fn gauge(name: &str, help: &str, labels: &[&str], read: ReadSamples) -> Pulled {
        Pulled::values(MetricType::GAUGE, name, help, labels, read)
    }

    /// A counter or gauge family (`kind`) with `labels`.
    pub fn values(
        kind: MetricType,
        name: &str,
        help: &str,
        labels: &[&str],
        read: ReadSamples,
    ) -> Pulled {
        Pulled::new(name, help, labels, Source::Values(kind, read))
    }

    /// A histogram without labels.
    pub fn histogram(name: &str, help: &str, read: ReadHistogram) -> Pulled {
        Pulled::new(name, help, &[], Source::Histogram(read))
    }

    /// Names and help texts are the service's own constants: a malformed one is a bug.
    fn new(name: &str, help: &str, labels: &[&str], source: Source) -> Pulled {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        let desc = Desc::new(name.into(), help.into(), labels, Default::default())
            .unwrap_or_else(|e| panic!("metric {name}: {e}"));
        Pulled { desc, source }
    }

    /// The label pairs of one sample.
    fn labels(&self, values: Vec<String>) -> Vec<LabelPair> {
        self.desc
            .variable_labels
            .iter()
            .zip(values)
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name(name.clone());
                pair.set_value(value);
                pair
            })
            .collect()
    }
}

impl Collector for Pulled {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (kind, metrics) = match &self.source {
            Source::Values(kind, read) => {
                let metrics: Vec<Metric> = read()
                    .into_iter()
                    .map(|(labels, value)| {
                        let mut metric = Metric::from_label(self.labels(labels));
                        if *kind == MetricType::COUNTER {
                            let mut counter = Counter::default();
                            counter.set_value(value);
                            metric.set_counter(counter);
                        } else {
                            let mut gauge = Gauge::default();
                            gauge.set_value(value);
                            metric.set_gauge(gauge);
                        }
                        metric
                    })
                    .collect();
                (*kind, metrics)
            }
            Source::Histogram(read) => {
                let metrics = read()
                    .map(|sample| {
                        let mut histogram = Histogram::default();
                        histogram.set_bucket(
                            sample
                                .cumulative
                                .iter()
                                .map(|(bound, count)| {
                                    let mut bucket = Bucket::default();
                                    bucket.set_upper_bound(*bound);
                                    bucket.set_cumulative_count(*count);
                                    bucket
                                })
                                .collect(),
                        );
                        histogram.set_sample_sum(sample.sum);
                        histogram.set_sample_count(sample.count);
                        let mut metric = Metric::default();
                        metric.set_histogram(histogram);
                        metric
                    })
                    .into_iter()
                    .collect();
                (MetricType::HISTOGRAM, metrics)
            }
        };
        if metrics.is_empty() {
            return Vec::new();
        }
        let mut family = MetricFamily::default();
        family.set_name(self.desc.fq_name.clone());
        family.set_help(self.desc.help.clone());
        family.set_field_type(kind);
        family.set_metric(metrics);
        vec![family]
    }
}

/// One unlabelled sample, when there is a value.
pub fn one(value: Option<f64>) -> Vec<Sample> {
    value.map(|v| vec![(Vec::new(), v)]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use prometheus::{Registry, TextEncoder};

    use super::*;

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        TextEncoder::new()
            .encode_utf8(&registry.gather(), &mut out)
            .unwrap();
        out
    }

    #[test]
    fn families_are_read_at_each_scrape_with_their_labels_and_left_out_without_a_source() {
        let value = Arc::new(AtomicU64::new(3));
        let read = value.clone();
        let registry = Registry::new();
        registry
            .register(Box::new(Pulled::counter(
                "t_things_total",
                "Things.",
                &["kind"],
                Box::new(move || {
                    vec![
                        (vec!["a".into()], read.load(Ordering::Relaxed) as f64),
                        (vec!["b".into()], 1.5),
                    ]
                }),
            )))
            .unwrap();
        registry
            .register(Box::new(Pulled::gauge(
                "t_absent",
                "No source.",
                &[],
                Box::new(|| one(None)),
            )))
            .unwrap();
        registry
            .register(Box::new(Pulled::histogram(
                "t_seconds",
                "Times.",
                Box::new(|| {
                    Some(HistogramSample {
                        cumulative: vec![(0.5, 2), (1.0, 3)],
                        sum: 2.25,
                        count: 4,
                    })
                }),
            )))
            .unwrap();
        let first = text(&registry);
        assert!(first.contains("# HELP t_things_total Things.\n# TYPE t_things_total counter\n"));
        assert!(first.contains("t_things_total{kind=\"a\"} 3\n"), "{first}");
        assert!(
            first.contains("t_things_total{kind=\"b\"} 1.5\n"),
            "{first}"
        );
        assert!(!first.contains("t_absent"), "{first}");
        assert!(
            first.contains("t_seconds_bucket{le=\"0.5\"} 2\n"),
            "{first}"
        );
        assert!(
            first.contains("t_seconds_bucket{le=\"+Inf\"} 4\n"),
            "{first}"
        );
        assert!(
            first.contains("t_seconds_sum 2.25\nt_seconds_count 4\n"),
            "{first}"
        );
        value.store(7, Ordering::Relaxed);
        assert!(text(&registry).contains("t_things_total{kind=\"a\"} 7\n"));
    }
}

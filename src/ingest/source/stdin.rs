//! The stdin source (`thresher serve --stdin`): LIBSVM or JSON lines read from standard input, parsed
//! with the same rules as an HTTP body and handed to [`Admission`], waiting for room rather than
//! dropping (stdin can be paused). It owns the reading, batching and bad-line accounting of stdin
//! only; the daemon starts and detaches its thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::ingest::batch::{parse_body_into, BodyFormat, Claim, FeatureDictionary, Rules};
use crate::ingest::{is_skippable, Admission, AdmitError, Source};
use crate::metrics::{reason, Metrics};
use crate::sample::SampleBlock;

/// stdin lines per batch at most.
const STDIN_BATCH: usize = 1024;
/// How often a batch waiting for room in the ingest queue re-checks `stop` (the learners' idle wait).
const ADMIT_POLL: Duration = Duration::from_millis(20);

/// `--stdin`: LIBSVM or JSON lines (a line starting with `{` is JSON). A bad line is logged with its
/// number and counted; the rest go on. Lines are batched while more input is immediately available.
pub fn stdin_loop(
    admission: &Admission,
    stop: &AtomicBool,
    metrics: &Metrics,
    rules: &Rules,
    dictionary: &FeatureDictionary,
) {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, std::io::stdin());
    let mut batch = SampleBlock::new();
    // What the batch's lines ask of the dictionary, granted when the batch is admitted.
    let mut claim = Claim::default();
    let mut bytes = Vec::new();
    let mut number = 0usize;
    // Back-pressure: wait for room rather than drop, since stdin can be paused; unless stopping.
    let send = |batch: &mut SampleBlock, claim: &mut Claim| {
        let claim = std::mem::take(claim);
        if !batch.is_empty() {
            let batch = std::mem::take(batch);
            if let Err(AdmitError::Invalid(e)) =
                admission.admit_waiting(batch, claim, Source::Stdin, stop, ADMIT_POLL)
            {
                tracing::warn!(error = %e.message, line = e.line, "stdin: batch refused at admission");
            }
        }
    };
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "stdin read failed; stdin ingest stops");
                break;
            }
        }
        number += 1;
        if stop.load(Ordering::Acquire) {
            return;
        }
        // A line that is not UTF-8 is a bad line like any other: skipped, logged and counted, and the
        // input goes on (reading it as a `String` ended stdin ingest at that line).
        let Ok(line) = std::str::from_utf8(&bytes) else {
            tracing::warn!(line = number, "stdin: bad line skipped: not UTF-8");
            metrics.rejected.with_label_values(&[reason::INVALID]).inc();
            continue;
        };
        if !is_skippable(line) {
            let format = if line.trim_start().starts_with('{') {
                BodyFormat::Ndjson
            } else {
                BodyFormat::Libsvm
            };
            // Straight onto the batch; a bad line leaves it as it was.
            if let Err(e) = parse_body_into(format, line, rules, dictionary, &mut batch, &mut claim)
            {
                tracing::warn!(line = number, error = %e.message, "stdin: bad line skipped");
                metrics.rejected.with_label_values(&[reason::INVALID]).inc();
            }
        }
        if batch.len() >= STDIN_BATCH || reader.buffer().is_empty() {
            send(&mut batch, &mut claim);
        }
    }
    send(&mut batch, &mut claim);
    tracing::info!(lines = number, "stdin: end of input; still serving");
}

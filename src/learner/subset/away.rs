//! The best-subset solve on a thread of its own: the daemon's subset learner builds each solver on the
//! window under its lock (a copy of the window's columns) and hands it here, where the outer steps run
//! while the learner thread goes on absorbing samples. An outer step on a large window takes seconds
//! (the W3-like stream's 100k x 2^20 window); run under the learner's lock it held every insert back
//! that long, and HTTP answered 503 (0.11 M samples/s, `docs/benchmarks/learners.md`).
//!
//! One job at a time: a newer job supersedes the one running, which stops after its current outer step
//! (its results, tagged with its generation, are dropped by the learner). The thread ends when the
//! learner drops its end of the job channel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError, TrySendError};

use crate::solver::subset::{SubsetParams, SubsetSolver};
use crate::solver::Certificate;

/// What one outer step left, for the learner to publish.
pub struct Outcome {
    /// The job it belongs to.
    pub generation: u64,
    /// The model's nonzero weights.
    pub weights: Vec<(u32, f64)>,
    pub active: Vec<u32>,
    pub certificate: Certificate,
    pub gap: f64,
    pub active_set_size: usize,
    pub screened: usize,
    /// The solve met a stopping rule ([`finished`]): no more outcomes of this job follow.
    pub finished: bool,
}

impl Outcome {
    /// One outer step of `solver`, its gap added to `gaps` (the solve's, for its stopping rules).
    pub fn step(
        solver: &mut SubsetSolver,
        generation: u64,
        gaps: &mut Vec<f64>,
        params: &SubsetParams,
    ) -> Outcome {
        let step = solver.step();
        gaps.push(step.row.gap);
        let view = solver.model();
        Outcome {
            generation,
            weights: view
                .support
                .iter()
                .map(|&j| (j, view.weights[j as usize]))
                .collect(),
            active: solver.active_set(),
            certificate: solver.certificate(),
            gap: step.row.gap,
            active_set_size: step.active_set_size,
            screened: step.screened,
            finished: finished(gaps, params),
        }
    }
}

struct Job {
    generation: u64,
    solver: SubsetSolver,
    params: SubsetParams,
}

/// The learner's end: sends jobs, receives their outer steps.
pub struct Away {
    jobs: Sender<Job>,
    outcomes: Receiver<Outcome>,
    /// The generation the thread should be working on; a job of an older one stops.
    current: Arc<AtomicU64>,
    /// A job was sent and has not finished.
    pub running: bool,
    /// Outcomes of the running job received so far.
    pub received: usize,
}

impl Away {
    /// Starts the thread, named after the learner.
    pub fn start(learner: &str) -> std::io::Result<Away> {
        let (jobs, job_rx) = bounded::<Job>(1);
        // One outer step in hand: the thread does not run ahead of what the learner has taken.
        let (outcome_tx, outcomes) = bounded::<Outcome>(1);
        let current = Arc::new(AtomicU64::new(0));
        let watched = current.clone();
        std::thread::Builder::new()
            .name(format!("subset-{learner}"))
            .spawn(move || run(job_rx, outcome_tx, &watched))?;
        Ok(Away {
            jobs,
            outcomes,
            current,
            running: false,
            received: 0,
        })
    }

    /// Hands a solver to the thread, superseding the job running.
    pub fn send(&mut self, solver: SubsetSolver, params: SubsetParams) {
        let generation = self.current.fetch_add(1, Ordering::AcqRel) + 1;
        let mut job = Job {
            generation,
            solver,
            params,
        };
        loop {
            match self.jobs.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    job = back;
                    // The thread has a superseded job to hand over or to start: everything it
                    // sends now is stale; taking it lets the thread reach the newer job.
                    let _ = self.outcomes.recv_timeout(Duration::from_millis(1));
                }
                Err(TrySendError::Disconnected(_)) => panic!("the subset solve thread ended"),
            }
        }
        self.running = true;
        self.received = 0;
    }

    /// The next outcome of the running job, if one is ready (outcomes of superseded jobs are skipped).
    pub fn try_next(&mut self) -> Option<Outcome> {
        loop {
            match self.outcomes.try_recv() {
                Ok(o) => {
                    if let Some(o) = self.current_only(o) {
                        return Some(o);
                    }
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => panic!("the subset solve thread panicked"),
            }
        }
    }

    /// Waits for the next outcome of the running job (`None` if no job runs).
    pub fn wait_next(&mut self) -> Option<Outcome> {
        while self.running {
            let o = self
                .outcomes
                .recv()
                .expect("the subset solve thread panicked");
            if let Some(o) = self.current_only(o) {
                return Some(o);
            }
        }
        None
    }

    fn current_only(&mut self, o: Outcome) -> Option<Outcome> {
        if o.generation != self.current.load(Ordering::Acquire) {
            return None;
        }
        self.received += 1;
        if o.finished {
            self.running = false;
        }
        Some(o)
    }
}

/// The stopping rules of a solve (the offline ones): its gap below `xi`, its gap changed by less than
/// `zeta` over two outer steps, or `max_outer` outer steps taken. `gaps` holds every outer step's gap,
/// the last one included.
pub fn finished(gaps: &[f64], params: &SubsetParams) -> bool {
    let Some(&gap) = gaps.last() else {
        return false;
    };
    let stalled = gaps.len() >= 3 && (gaps[gaps.len() - 3] - gap).abs() < params.zeta;
    gap < params.xi || stalled || gaps.len() >= params.max_outer
}

/// The thread: runs each job's outer steps until a stopping rule, a newer job, or the learner is gone.
fn run(jobs: Receiver<Job>, outcomes: Sender<Outcome>, current: &AtomicU64) {
    crate::sys::set_thread_nice(crate::sys::SOLVE_NICE);
    for mut job in jobs.iter() {
        let mut gaps = Vec::new();
        while current.load(Ordering::Acquire) == job.generation {
            let outcome = Outcome::step(&mut job.solver, job.generation, &mut gaps, &job.params);
            let done = outcome.finished;
            if outcomes.send(outcome).is_err() {
                return;
            }
            if done {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::subset::Penalty;
    use crate::synth::sparse_stream;

    /// The solve thread runs at [`crate::sys::SOLVE_NICE`], whatever the thread that started it (it
    /// inherited nice 0 from the daemon's start-up and outran the parsers and the learner).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_solve_runs_below_the_parsers() {
        let away = Away::start("nice").unwrap();
        let nice_of_solve = || {
            for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.trim() == "subset-nice" {
                    let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
                    // Fields after the command's closing parenthesis: state is field 3, nice 19.
                    let rest = &stat[stat.rfind(')').unwrap() + 2..];
                    return rest.split(' ').nth(16).and_then(|n| n.parse::<i32>().ok());
                }
            }
            None
        };
        // The thread names itself and sets its nice value as it starts: look until it has, a bounded
        // number of times (a thread left at 0 fails instead of hanging the suite).
        let mut seen = nice_of_solve();
        for _ in 0..100_000 {
            if seen == Some(crate::sys::SOLVE_NICE) {
                break;
            }
            std::thread::yield_now();
            seen = nice_of_solve();
        }
        assert_eq!(seen, Some(crate::sys::SOLVE_NICE));
        const { assert!(crate::sys::SOLVE_NICE > crate::sys::PARSER_NICE) };
        drop(away);
    }

    #[test]
    fn a_newer_job_supersedes_the_one_running() {
        let data = sparse_stream(400, 100, 4, 10, 0.01, false, 3);
        let params = SubsetParams::new(Penalty::new(1.0, 0.0, 1e-3).unwrap());
        let data = crate::sample::Dataset::from_samples(&data.samples, 0);
        let solver = SubsetSolver::new(&data, params).unwrap();
        let mut away = Away::start("test").unwrap();
        away.send(solver.clone(), params);
        away.send(solver.clone(), params);
        let mut gaps = Vec::new();
        while let Some(o) = away.wait_next() {
            assert_eq!(o.generation, 2, "only the newer job's steps are handed out");
            gaps.push(o.gap);
        }
        assert!(finished(&gaps, &params) && !away.running);
        // The same steps as the solver run here.
        let mut here = solver;
        let mine: Vec<f64> = gaps.iter().map(|_| here.step().row.gap).collect();
        assert_eq!(gaps, mine);
    }
}

//! The daemon's unit tests: the whole of `run`, in-process, in `run.rs`.

mod run;

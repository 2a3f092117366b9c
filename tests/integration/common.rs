//! The one harness every integration module uses: running the `thresher` binary to completion, temporary
//! input files, a `thresher serve` process driven over HTTP, bounded polling, and reading model JSON.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::Value;
use thresher::model::Model;
use thresher::sample::Sample;
use thresher::synth::to_libsvm;

/// Upper bound on every wait on the daemon (each normally takes well under a second).
pub const WAIT: Duration = Duration::from_secs(20);

/// The binary under test, with a deterministic stderr (no backtraces) and `env` added.
fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_thresher"));
    command
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .envs(env.iter().copied());
    command
}

/// Runs `thresher ARGS` to completion.
pub fn thresher(args: &[&str]) -> Output {
    thresher_with_env(args, &[])
}

/// Runs `thresher ARGS` to completion with extra environment variables.
pub fn thresher_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    command(args, env).output().expect("run thresher")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts the run succeeded (`what` and its stderr otherwise); returns the stderr.
pub fn assert_succeeded(out: &Output, what: &str) -> String {
    let stderr = stderr(out);
    assert!(out.status.success(), "{what}: {stderr}");
    stderr
}

/// Asserts the run failed with `message` in its stderr, and not by a panic.
pub fn assert_failed_with(out: &Output, message: &str) {
    let stderr = stderr(out);
    assert!(
        !out.status.success(),
        "should fail with {message:?}: {stderr}"
    );
    assert!(stderr.contains(message), "{message:?} not in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Writes `text` to `dir/name`; returns the path as an argument.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// One `fit` test's files in a fresh temporary directory: the training data, and the paths `--out` and
/// `--trace` write to.
pub struct FitFiles {
    pub dir: tempfile::TempDir,
    pub data: String,
    pub model: String,
    pub trace: String,
}

impl FitFiles {
    /// `samples` as LIBSVM in `train.svm`.
    pub fn new(samples: &[Sample]) -> FitFiles {
        FitFiles::with_data("train.svm", &to_libsvm(samples))
    }

    /// `text` in the data file `name`.
    pub fn with_data(name: &str, text: &str) -> FitFiles {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        FitFiles {
            data: write(dir.path(), name, text),
            model: path("model.json"),
            trace: path("trace.csv"),
            dir,
        }
    }

    /// The model `--out` wrote.
    pub fn load_model(&self) -> Model {
        Model::load(Path::new(&self.model)).unwrap()
    }

    /// The CSV `--trace` wrote.
    pub fn read_trace(&self) -> String {
        std::fs::read_to_string(&self.trace).unwrap()
    }
}

/// Calls `f` every `every` until it returns Some; panics after `bound` with `what` and `context()`.
pub fn poll<T>(
    what: &str,
    bound: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < bound,
            "timed out after {bound:?} waiting for {what}; {}",
            context()
        );
        std::thread::sleep(every);
    }
}

/// The support of a model JSON.
pub fn support(model: &Value) -> Vec<u32> {
    model["support"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

/// `gap / max(|primal|, 1)` of a model JSON's certificate.
pub fn relative_gap(model: &Value) -> f64 {
    let c = &model["certificate"];
    c["gap"].as_f64().unwrap() / c["primal"].as_f64().unwrap().abs().max(1.0)
}

/// A daemon config with small, fast settings; `extra` is appended (sections not repeated here).
pub fn test_config(dir: &Path, learner: &str, extra: &str) -> PathBuf {
    let text = format!(
        "[snapshot]\ninterval_ms = 50\n[window]\ncapacity = 2000\n{extra}\n[[learner]]\n{learner}\n"
    );
    let path = dir.join("thresher.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `--config CONFIG --data-dir DATA_DIR`, the arguments of a daemon that checkpoints.
pub fn serve_args<'a>(
    config: &'a impl AsRef<Path>,
    data_dir: &'a impl AsRef<Path>,
) -> [&'a str; 4] {
    let arg = |p: &'a Path| p.to_str().unwrap();
    [
        "--config",
        arg(config.as_ref()),
        "--data-dir",
        arg(data_dir.as_ref()),
    ]
}

/// A running `thresher serve --listen 127.0.0.1:0`; killed on drop if a test fails half-way.
pub struct Daemon {
    child: Child,
    /// `http://ADDR` of the bound address the daemon logged.
    pub base: String,
    log: Arc<Mutex<String>>,
    /// Ends at the daemon's stderr EOF: joined once the process has exited, so the log is complete.
    log_reader: Option<JoinHandle<()>>,
    pub client: Client,
}

impl Daemon {
    pub fn start(args: &[&str]) -> Daemon {
        Daemon::spawn(args, None, &[])
    }

    /// Starts the daemon, writes `input` to its stdin and closes it (EOF).
    pub fn start_with_stdin(args: &[&str], input: &str) -> Daemon {
        Daemon::spawn(args, Some(input.as_bytes()), &[])
    }

    /// [`Daemon::start_with_stdin`] with input that need not be UTF-8.
    pub fn start_with_stdin_bytes(args: &[&str], input: &[u8]) -> Daemon {
        Daemon::spawn(args, Some(input), &[])
    }

    /// Starts the daemon with extra environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::spawn(args, None, env)
    }

    /// Starts the daemon with extra environment variables and `customize` applied to its command (e.g.
    /// resource limits for the child).
    pub fn start_customized(
        args: &[&str],
        env: &[(&str, &str)],
        customize: impl FnOnce(&mut Command),
    ) -> Daemon {
        Daemon::spawn_with(args, None, env, customize)
    }

    fn spawn(args: &[&str], input: Option<&[u8]>, env: &[(&str, &str)]) -> Daemon {
        Daemon::spawn_with(args, input, env, |_| {})
    }

    fn spawn_with(
        args: &[&str],
        input: Option<&[u8]>,
        env: &[(&str, &str)],
        customize: impl FnOnce(&mut Command),
    ) -> Daemon {
        let mut command = command(&["serve", "--listen", "127.0.0.1:0"], env);
        customize(&mut command);
        let mut child = command
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start thresher serve");
        if let Some(text) = input {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(text).unwrap();
        }
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        let log_reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                }
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let addr = match rx.recv_timeout(WAIT) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("daemon did not log its address:\n{}", log.lock().unwrap());
            }
        };
        // Pooled connections are dropped after 0.5 s idle, below the daemon's smallest
        // `keepalive_timeout_s` (1 s): a request never goes out on a connection the daemon is closing
        // for idleness at that moment (which the client sees as a reset).
        let client = Client::builder()
            .timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        Daemon {
            child,
            base: format!("http://{addr}"),
            log,
            log_reader: Some(log_reader),
            client,
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's resident memory (`VmRSS` of /proc/PID/status), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {status}"))
    }

    /// The daemon's stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn post(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::blocking::Body>,
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body)
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
            headers,
        )
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .unwrap();
        (r.status().as_u16(), r.text().unwrap())
    }

    /// The primary learner's published model (`GET /v1/model`), if any.
    pub fn model(&self) -> Option<Value> {
        self.json_if_ok("/v1/model")
    }

    /// Learner `name`'s published model (`GET /v1/models/{name}`), if any.
    pub fn learner_model(&self, name: &str) -> Option<Value> {
        self.json_if_ok(&format!("/v1/models/{name}"))
    }

    fn json_if_ok(&self, path: &str) -> Option<Value> {
        let (status, body) = self.get(path);
        (status == 200).then(|| serde_json::from_str(&body).unwrap())
    }

    /// The value of one metric series from `/metrics` (exact line prefix, e.g. `name{label="x"}`).
    pub fn metric(&self, series: &str) -> f64 {
        let (_, text) = self.get("/metrics");
        text.lines()
            .find_map(|l| {
                l.strip_prefix(series)
                    .and_then(|rest| rest.strip_prefix(' '))
            })
            .unwrap_or_else(|| panic!("{series} not in /metrics:\n{text}"))
            .parse()
            .unwrap()
    }

    /// Polls until `f` returns Some (bounded by [`WAIT`]).
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut(&Daemon) -> Option<T>) -> T {
        poll(
            what,
            WAIT,
            Duration::from_millis(25),
            || f(self),
            || format!("log:\n{}", self.log()),
        )
    }

    /// Waits until the primary's published version stops moving for 400 ms (the learner is idle).
    pub fn wait_until_settled(&self) -> Value {
        self.settled("a settled model", Daemon::model)
    }

    /// Waits until learner `name`'s published version stops moving for 400 ms.
    pub fn wait_until_learner_settled(&self, name: &str) -> Value {
        self.settled(&format!("a settled {name} model"), |d| {
            d.learner_model(name)
        })
    }

    fn settled(&self, what: &str, fetch: impl Fn(&Daemon) -> Option<Value>) -> Value {
        let mut last: Option<(u64, Instant)> = None;
        self.wait_for(what, |d| {
            let m = fetch(d)?;
            let v = m["version"].as_u64().unwrap();
            match last {
                Some((lv, since)) if lv == v && since.elapsed() > Duration::from_millis(400) => {
                    Some(m)
                }
                Some((lv, _)) if lv == v => None,
                _ => {
                    last = Some((v, Instant::now()));
                    None
                }
            }
        })
    }

    /// SIGTERM, then [`Daemon::wait_exit`].
    pub fn terminate(self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.wait_exit("stop on SIGTERM")
    }

    /// Waits (bounded by [`WAIT`]) for the daemon to exit on its own; returns its status and full log.
    pub fn wait_exit(mut self, what: &str) -> (ExitStatus, String) {
        let status = poll(
            what,
            WAIT,
            Duration::from_millis(20),
            || self.child.try_wait().unwrap(),
            || format!("still running; log:\n{}", self.log.lock().unwrap()),
        );
        if let Some(reader) = self.log_reader.take() {
            reader.join().unwrap();
        }
        (status, self.log())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asserts every number a model JSON serves is present and finite (a non-finite f64 serialises as
/// `null`).
pub fn assert_finite_model(m: &Value) {
    let number = |v: &Value, what: &str| {
        let x = v
            .as_f64()
            .unwrap_or_else(|| panic!("{what} is not a number: {m}"));
        assert!(x.is_finite(), "{what} = {x}: {m}");
    };
    for key in ["primal", "dual", "gap"] {
        number(&m["certificate"][key], key);
    }
    number(&m["intercept"], "intercept");
    number(&m["progressive_loss"], "progressive_loss");
    for w in m["weights"].as_array().unwrap() {
        number(w, "a weight");
    }
}

/// The number of samples a daemon reports learned by the primary.
pub fn samples_seen(d: &Daemon) -> Option<u64> {
    d.model().and_then(|m| m["samples_seen"].as_u64())
}

/// A model JSON's certificate: `(primal, dual, gap)`.
pub fn certificate(m: &Value) -> (f64, f64, f64) {
    let c = &m["certificate"];
    let get = |k: &str| c[k].as_f64().unwrap_or_else(|| panic!("{k}: {m}"));
    (get("primal"), get("dual"), get("gap"))
}

/// A model JSON's weights, parallel to its support.
pub fn model_weights(m: &Value) -> Vec<f64> {
    m["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect()
}

/// The logistic loss `ln(1 + exp(-y u))`, without overflow.
pub fn logistic_loss(y: f64, u: f64) -> f64 {
    let z = -y * u;
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// POSTs a JSON body; the status and the JSON answer.
pub fn post_json(d: &Daemon, path: &str, body: &Value) -> (u16, Value) {
    let (status, answer, _) = d.post(path, "application/json", body.to_string());
    (status, answer)
}

//! Provisioning, the fake LLM and real QwenPaw servers (contract §8).

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::R;
use crate::api::Api;
use crate::procs::{self, Group, clip};

pub fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("e2e")
}

/// The provisioned virtualenv.
pub struct Venv {
    pub python: PathBuf,
}

impl Venv {
    /// A new virtualenv at `dir` on top of this one: its own site-packages and bin/ (so
    /// what pip installs there is its own, and the provisioned venv stays as it was), the
    /// provisioned packages through a `.pth` line, and a `qwenpaw` script of its own.
    /// Returns its python.
    pub fn layered(&self, dir: &Path) -> R<PathBuf> {
        let out = Command::new(&self.python)
            .args(["-m", "venv"])
            .arg(dir)
            .output()
            .map_err(|e| format!("python -m venv: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "python -m venv {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let site = |python: &Path| -> R<String> {
            let out = Command::new(python)
                .args([
                    "-c",
                    "import sysconfig; print(sysconfig.get_path('purelib'))",
                ])
                .output()
                .map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let python = dir.join("bin/python");
        // QwenPaw's plugin loader refuses a pip older than 26.2.2 ("Unsafe pip").
        let out = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                "--upgrade",
                "pip>=26.2.2",
            ])
            .output()
            .map_err(|e| format!("pip upgrade: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "upgrading pip in {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let (base, own) = (site(&self.python)?, site(&python)?);
        fs::write(
            Path::new(&own).join("atc-e2e-qwenpaw.pth"),
            format!("{base}\n"),
        )
        .map_err(|e| format!("{own}: {e}"))?;
        let script = fs::read_to_string(self.bin().join("qwenpaw")).map_err(|e| e.to_string())?;
        let body = script.split_once('\n').map_or("", |(_, rest)| rest);
        let qwenpaw = dir.join("bin/qwenpaw");
        fs::write(&qwenpaw, format!("#!{}\n{body}", python.display()))
            .map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&qwenpaw, fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        Ok(python)
    }

    /// Runs provision.sh (progress on our stderr); its last stdout line is the python.
    pub fn provision() -> R<Venv> {
        let script = e2e_dir().join("provision.sh");
        let mut child = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        // Progress goes on to our stderr as it comes; the last lines give the reason.
        let stderr = child.stderr.take().expect("piped stderr");
        let echo = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                lines.push(line);
            }
            lines
        });
        let out = child
            .wait_with_output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let lines = echo.join().unwrap_or_default();
        if !out.status.success() {
            let reason = lines
                .iter()
                .rev()
                .find(|l| l.starts_with("provision: FAILED:"))
                .cloned()
                .unwrap_or_else(|| clip(&lines.join(" | "), 600));
            return Err(format!(
                "provisioning QwenPaw failed ({}): {reason}",
                out.status
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let python = stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        let python = PathBuf::from(python);
        if !python.is_file() {
            return Err(format!(
                "provision.sh printed no usable python path: {stdout:?}"
            ));
        }
        Ok(Venv { python })
    }

    pub fn bin(&self) -> PathBuf {
        self.python
            .parent()
            .expect("venv python has a parent")
            .to_path_buf()
    }
}

pub fn free_port() -> R<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// tests/e2e/fake_llm.py, listening on a free loopback port.
pub struct FakeLlm {
    _group: Group,
    pub port: u16,
    /// Every request body, one JSON per line.
    pub log: PathBuf,
}

impl FakeLlm {
    pub fn start(venv: &Venv, dir: &Path) -> R<FakeLlm> {
        let log = dir.join("fake-llm-requests.jsonl");
        let mut cmd = Command::new(&venv.python);
        cmd.arg(e2e_dir().join("fake_llm.py"))
            .arg("0")
            .current_dir(dir)
            .env("FAKE_LLM_LOG", &log)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(
                fs::File::create(dir.join("fake-llm.stderr"))
                    .map_err(|e| format!("fake LLM stderr file: {e}"))?,
            );
        let mut group = Group::spawn("fake LLM", cmd)?;
        let stdout = group
            .child_mut()
            .and_then(|c| c.stdout.take())
            .ok_or("fake LLM: no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .map_err(|_| "fake LLM printed no port within 20 s".to_string())?;
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("fake LLM printed {line:?}, not `PORT <n>`"))?;
        Ok(FakeLlm {
            _group: group,
            port,
            log,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

#[derive(Default)]
pub struct ServerOptions {
    /// Sets QWENPAW_RUNTIME_INTERNAL_TOKEN in the server's environment.
    pub token: Option<String>,
    /// Prepended to the server's PATH (the directory of the built atc).
    pub path_prepend: Option<PathBuf>,
    /// Extra environment for the server (and so for its agents' shell tools).
    pub env: Vec<(String, String)>,
    /// Configure the default agent's MQTT channel to a broker on this port (contract §9).
    pub mqtt_port: Option<u16>,
    /// Another virtualenv's python (one `Venv::layered` made): the server runs from it.
    pub python: Option<PathBuf>,
    /// The server's PATH exactly, instead of the venv's bin/ and the suite's PATH.
    pub path: Option<OsString>,
    /// Start the server as `<venv>/bin/qwenpaw app`, by its absolute path (as a systemd
    /// unit or a launcher does), not as `python <venv>/bin/qwenpaw app`.
    pub by_absolute_path: bool,
}

/// A real `qwenpaw app` on a free loopback port, in its own temp HOME/working dir.
pub struct Server {
    pub name: String,
    pub dir: TempDir,
    pub port: u16,
    pub token: Option<String>,
    pub agents: Vec<String>,
    python: PathBuf,
    bin: PathBuf,
    by_absolute_path: bool,
    env: Vec<(OsString, OsString)>,
    group: Option<Group>,
    starts: u32,
}

impl Server {
    /// The shipped agent that is not `default` (`QwenPaw_QA_Agent_0.2`): for real
    /// cross-agent delegations.
    pub fn second_agent(&self) -> crate::R<String> {
        self.agents
            .iter()
            .find(|a| *a != "default")
            .cloned()
            .ok_or_else(|| "no second agent".to_string())
    }

    pub fn create(name: &str, venv: &Venv, llm: &FakeLlm, opts: ServerOptions) -> R<Server> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("atc-e2e-{name}-"))
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let mut dir = dir;
        if crate::keep_dirs() {
            dir.disable_cleanup(true);
            eprintln!("e2e: keeping {}", dir.path().display());
        }
        let home = dir.path().join("home");
        let tmp = dir.path().join("tmp");
        for d in [&home, &tmp] {
            fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let mut path = Vec::new();
        if let Some(p) = &opts.path_prepend {
            path.push(p.clone());
        }
        path.push(venv.bin());
        // The suite's own PATH without any folder holding an atc: a server finds only
        // the atc a scenario gives it (ATC_BIN, path_prepend, the plugin's own), never one
        // the person running the suite has installed.
        path.extend(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .filter(|dir| !dir.join("atc").exists()),
        );
        let path = match &opts.path {
            Some(exact) => exact.clone(),
            None => std::env::join_paths(path).map_err(|e| e.to_string())?,
        };
        let python = opts.python.clone().unwrap_or_else(|| venv.python.clone());
        let bin = python.parent().expect("a python in a bin/").to_path_buf();

        // A clean environment: nothing of the outer QwenPaw/atc setup leaks in.
        let mut env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), path),
            ("HOME".into(), home.clone().into()),
            ("TMPDIR".into(), tmp.into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("QWENPAW_WORKING_DIR".into(), home.join(".qwenpaw").into()),
            ("QWENPAW_TELEMETRY_DISABLED".into(), "1".into()),
            ("QWENPAW_DISABLE_KEYRING".into(), "1".into()),
            ("QWENPAW_LLM_MAX_RETRIES".into(), "0".into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ];
        if let Some(t) = &opts.token {
            env.push(("QWENPAW_RUNTIME_INTERNAL_TOKEN".into(), t.into()));
        }
        for (k, v) in &opts.env {
            env.push((k.into(), v.into()));
        }

        let mut server = Server {
            name: name.to_string(),
            port: free_port()?,
            token: opts.token,
            agents: Vec::new(),
            python,
            bin,
            by_absolute_path: opts.by_absolute_path,
            env,
            group: None,
            dir,
            starts: 0,
        };

        let out = server.python(
            "qwenpaw_setup.py setup",
            &[
                e2e_dir().join("qwenpaw_setup.py").into(),
                "setup".into(),
                "--llm-url".into(),
                llm.url().into(),
            ],
            None,
            Duration::from_secs(240),
        )?;
        if !out.status.success() {
            return Err(format!("qwenpaw_setup.py setup failed: {}", out.describe()));
        }
        let info: Value = out
            .stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("qwenpaw_setup.py setup printed no JSON: {}", out.describe()))?;
        server.agents = info["agents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(port) = opts.mqtt_port {
            // `transport` must be set: the default "" fails silently after a 200.
            let path = home.join(".qwenpaw/workspaces/default/agent.json");
            let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut agent: Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            agent["channels"]["mqtt"] = serde_json::json!({
                "enabled": true, "host": "127.0.0.1", "port": port, "transport": "tcp",
                "subscribe_topic": "probe/+/in", "publish_topic": "probe/{client_id}/out", "qos": 2
            });
            fs::write(&path, agent.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        server.start()?;
        Ok(server)
    }

    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn api(&self) -> Api {
        Api::new(&self.root(), self.token.clone())
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("server-{}.log", self.starts))
    }

    pub fn log_tail(&self) -> String {
        clip(
            &fs::read_to_string(self.log_path()).unwrap_or_default(),
            2000,
        )
    }

    /// The whole log of the server's current run.
    pub fn log_text(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The server process's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.group.as_ref().map(|g| g.pid())
    }

    /// Runs the venv's python with the server's environment.
    pub fn python(
        &self,
        what: &str,
        args: &[OsString],
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> R<procs::Output> {
        let mut cmd = Command::new(&self.python);
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .current_dir(self.dir.path());
        cmd.env("PYTHONIOENCODING", "utf-8");
        procs::run(what, cmd, stdin, timeout, self.dir.path())
    }

    pub fn start(&mut self) -> R<()> {
        self.starts += 1;
        let log = fs::File::create(self.log_path()).map_err(|e| format!("server log: {e}"))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = if self.by_absolute_path {
            Command::new(self.bin.join("qwenpaw"))
        } else {
            let mut cmd = Command::new(&self.python);
            cmd.arg(self.bin.join("qwenpaw"));
            cmd
        };
        cmd.args([
            "app",
            "--host",
            "127.0.0.1",
            "--port",
            &self.port.to_string(),
        ])
        .env_clear()
        .envs(self.env.iter().cloned())
        .current_dir(self.dir.path())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
        let mut group = Group::spawn(&format!("qwenpaw server {}", self.name), cmd)?;
        let api = self.api();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(120);
        loop {
            if let Some(status) = group.exited() {
                return Err(format!(
                    "qwenpaw server {} exited during startup ({status}); log: {}",
                    self.name,
                    self.log_tail()
                ));
            }
            if api.get("/api/healthz", None).is_ok_and(|r| r.status == 200) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "qwenpaw server {} not healthy after 120 s; log: {}",
                    self.name,
                    self.log_tail()
                ));
            }
            sleep(Duration::from_millis(250));
        }
        eprintln!(
            "e2e: server {} (pid {}) healthy on port {} after {:.1} s",
            self.name,
            group.pid(),
            self.port,
            started.elapsed().as_secs_f64()
        );
        self.group = Some(group);
        Ok(())
    }

    pub fn stop(&mut self) {
        if let Some(mut g) = self.group.take() {
            g.stop();
        }
    }

    /// Stop and start again on the same port and working dir: every in-memory task
    /// record is gone afterwards (contract §4).
    pub fn restart(&mut self) -> R<()> {
        self.stop();
        self.start()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

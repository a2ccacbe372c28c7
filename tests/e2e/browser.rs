//! A real headless Chromium (Debian's chromium-headless-shell, provisioned by
//! provision-browser.sh), driven by tests/e2e/browser.py over the DevTools protocol on a
//! pipe: one JSON command per line in, one JSON answer per line out.

use std::cell::RefCell;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::R;
use crate::procs::{self, Group};
use crate::qwenpaw::e2e_dir;

/// Where screenshots are kept: `<target dir>/e2e-artifacts/`.
pub fn artifacts() -> R<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target dir")
        .join("e2e-artifacts");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// One page the page's own requests are recorded for, from its start.
pub struct Browser {
    group: RefCell<Group>,
    stdin: RefCell<ChildStdin>,
    lines: Receiver<String>,
    pub version: String,
}

impl Browser {
    /// Provisions Chromium (the first time: apt-get) and starts it, profile under `dir`.
    pub fn start(python: &Path, dir: &Path) -> R<Browser> {
        let script = e2e_dir().join("provision-browser.sh");
        let out = procs::run(
            "provision-browser.sh",
            {
                let mut cmd = Command::new("bash");
                cmd.arg(&script);
                cmd
            },
            None,
            Duration::from_secs(600),
            dir,
        )?;
        if !out.status.success() {
            return Err(format!("provisioning Chromium failed: {}", out.describe()));
        }
        let chromium = out.stdout.lines().last().unwrap_or("").trim().to_string();
        let profile = dir.join("chromium-profile");
        fs::create_dir_all(&profile).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(python);
        cmd.arg(e2e_dir().join("browser.py"))
            .arg(&chromium)
            .arg(&profile)
            .current_dir(dir)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(dir.join("browser.stderr")).map_err(|e| e.to_string())?);
        let mut group = Group::spawn("chromium", cmd)?;
        let child = group.child_mut().ok_or("chromium: no child")?;
        let stdin = child.stdin.take().ok_or("chromium: no stdin")?;
        let stdout = child.stdout.take().ok_or("chromium: no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| format!("{chromium} did not start within 60 s"))?;
        let first: Value = serde_json::from_str(&first).map_err(|e| format!("{first:?}: {e}"))?;
        let version = first["ready"]
            .as_str()
            .ok_or_else(|| format!("{chromium}: {first}"))?
            .to_string();
        eprintln!("e2e: browser {version} ({chromium})");
        Ok(Browser {
            group: RefCell::new(group),
            stdin: RefCell::new(stdin),
            lines,
            version,
        })
    }

    fn call(&self, cmd: Value) -> R<Value> {
        let mut line = cmd.to_string();
        line.push('\n');
        self.stdin
            .borrow_mut()
            .write_all(line.as_bytes())
            .map_err(|e| format!("browser: {e}"))?;
        let answer = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .map_err(|_| format!("the browser did not answer {cmd}"))?;
        let answer: Value =
            serde_json::from_str(&answer).map_err(|e| format!("browser said {answer:?}: {e}"))?;
        match answer.get("ok") {
            Some(v) => Ok(v.clone()),
            None => Err(format!(
                "browser: {} ({cmd})",
                answer["error"].as_str().unwrap_or("no answer")
            )),
        }
    }

    /// Navigates and waits for the load event.
    pub fn open(&self, url: &str) -> R<()> {
        self.call(json!({"op": "open", "url": url})).map(drop)
    }

    /// The value of `js` in the page (a promise is awaited).
    pub fn eval(&self, js: &str) -> R<Value> {
        self.call(json!({"op": "eval", "js": js}))
    }

    /// Types `text` into the focused element.
    pub fn insert(&self, text: &str) -> R<()> {
        self.call(json!({"op": "insert", "text": text})).map(drop)
    }

    pub fn key(&self, key: &str) -> R<()> {
        self.call(json!({"op": "key", "key": key})).map(drop)
    }

    pub fn screenshot(&self, path: &Path) -> R<()> {
        self.call(json!({"op": "shot", "path": path})).map(drop)
    }

    /// How many requests the page has made so far.
    pub fn request_count(&self) -> R<usize> {
        Ok(
            self.call(json!({"op": "requests", "since": usize::MAX >> 1}))?["total"]
                .as_u64()
                .unwrap_or(0) as usize,
        )
    }

    /// The page's requests from the `since`-th on: (method, url).
    pub fn requests_since(&self, since: usize) -> R<Vec<(String, String)>> {
        let answer = self.call(json!({"op": "requests", "since": since}))?;
        Ok(answer["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r[1].as_str().unwrap_or("").to_string(),
                    r[2].as_str().unwrap_or("").to_string(),
                )
            })
            .collect())
    }

    /// How often the top frame has navigated (a reload counts).
    pub fn navigations(&self) -> R<u64> {
        Ok(self
            .call(json!({"op": "navigations"}))?
            .as_u64()
            .unwrap_or(0))
    }

    /// Evaluates `js` every 200 ms until it is truthy; when it first was.
    pub fn wait_for(&self, what: &str, js: &str, timeout: Duration) -> R<(Instant, Value)> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(js)?;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return Ok((Instant::now(), v));
            }
            if Instant::now() > deadline {
                return Err(format!("the page never showed {what} within {timeout:?}"));
            }
            sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call(json!({"op": "quit"}));
        self.group.borrow_mut().stop();
    }
}

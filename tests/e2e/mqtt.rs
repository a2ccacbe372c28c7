//! A real MQTT broker (Debian's mosquitto, provisioned by provision-broker.sh) and the
//! person on the other end of an MQTT chat (mqtt_person.py), for the IM-channel
//! scenarios (contract §9).

use std::fs;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::R;
use crate::procs::{self, Group};
use crate::qwenpaw::{Venv, e2e_dir, free_port};

/// mosquitto on a free loopback port, from a two-line config.
pub struct Broker {
    _group: Group,
    pub port: u16,
}

impl Broker {
    pub fn start(dir: &Path) -> R<Broker> {
        let script = e2e_dir().join("provision-broker.sh");
        let out = procs::run(
            "provision-broker.sh",
            {
                let mut cmd = Command::new("bash");
                cmd.arg(&script);
                cmd
            },
            None,
            Duration::from_secs(300),
            dir,
        )?;
        if !out.status.success() {
            return Err(format!(
                "provisioning the MQTT broker failed: {}",
                out.describe()
            ));
        }
        let bin = PathBuf::from(out.stdout.lines().last().unwrap_or("").trim());
        let port = free_port()?;
        let conf = dir.join("mosquitto.conf");
        fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\n"),
        )
        .map_err(|e| format!("{}: {e}", conf.display()))?;
        let log = fs::File::create(dir.join("mosquitto.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&bin);
        cmd.arg("-c")
            .arg(&conf)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        let mut group = Group::spawn("mosquitto", cmd)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = group.exited() {
                return Err(format!("mosquitto exited at start ({status})"));
            }
            if Instant::now() > deadline {
                return Err("mosquitto not listening after 20 s".into());
            }
            sleep(Duration::from_millis(50));
        }
        eprintln!("e2e: mosquitto ({}) on port {port}", bin.display());
        Ok(Broker {
            _group: group,
            port,
        })
    }
}

/// The person of an MQTT chat: listens on the agent's publish topic, speaks on its
/// subscribe topic.
pub struct Person {
    _listener: Group,
    python: PathBuf,
    port: u16,
    pub client: String,
    heard: PathBuf,
}

impl Person {
    /// Starts listening on `probe/<client>/out` (the channel's publish topic).
    pub fn start(venv: &Venv, broker: &Broker, client: &str, dir: &Path) -> R<Person> {
        let heard = dir.join(format!("{client}-heard.jsonl"));
        let mut cmd = Command::new(&venv.python);
        cmd.arg(e2e_dir().join("mqtt_person.py"))
            .args([
                "listen",
                &broker.port.to_string(),
                &format!("probe/{client}/out"),
            ])
            .arg(&heard)
            .current_dir(dir)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(
                fs::File::create(dir.join(format!("{client}-listener.stderr")))
                    .map_err(|e| e.to_string())?,
            );
        let mut group = Group::spawn("mqtt listener", cmd)?;
        let stdout = group
            .child_mut()
            .and_then(|c| c.stdout.take())
            .ok_or("mqtt listener: no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.trim() == "READY" => {}
            other => return Err(format!("mqtt listener did not subscribe: {other:?}")),
        }
        Ok(Person {
            _listener: group,
            python: venv.python.clone(),
            port: broker.port,
            client: client.to_string(),
            heard,
        })
    }

    /// Publishes `text` on `probe/<client>/in`, as the person typing into the chat.
    pub fn say(&self, text: &str, dir: &Path) -> R<()> {
        let mut cmd = Command::new(&self.python);
        cmd.arg(e2e_dir().join("mqtt_person.py")).args([
            "say",
            &self.port.to_string(),
            &format!("probe/{}/in", self.client),
            text,
        ]);
        let out = procs::run("mqtt say", cmd, None, Duration::from_secs(30), dir)?;
        if !out.status.success() {
            return Err(format!("mqtt say failed: {}", out.describe()));
        }
        Ok(())
    }

    /// Everything the person has received so far, in order.
    pub fn heard(&self) -> Vec<String> {
        fs::read_to_string(&self.heard)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_string))
            .collect()
    }

    /// Waits until the person has received more than `count` messages.
    pub fn wait_for_more(&self, count: usize, timeout: Duration) -> R<Vec<String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let heard = self.heard();
            if heard.len() > count {
                return Ok(heard);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the person received nothing new within {timeout:?} (so far: {heard:?})"
                ));
            }
            sleep(Duration::from_millis(100));
        }
    }
}

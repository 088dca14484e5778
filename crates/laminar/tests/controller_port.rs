//! Issue 41, hole 2: the controller port authenticates its peers. Before, a single node's
//! controller port (loopback, an ephemeral port, plain text) answered one JSON Heartbeat
//! frame from anyone with the cluster image, every SCRAM user's salt and keys among it, and
//! took cluster-metadata commands past the authorizer. Now each connection's two sides prove
//! they hold a secret (a single node's own; a cluster's `controller.quorum.secret.file`),
//! and a cluster whose port would take anyone does not start with an authorizer.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The TCP ports process `pid` listens on (from /proc: its sockets' inodes, matched in
/// /proc/net/tcp's LISTEN rows).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            let listening = f.get(3) == Some(&"0A");
            let port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
            (listening && inodes.iter().any(|i| Some(&i.as_str()) == f.get(9))).then_some(port)
        })
        .collect()
}

/// One JSON frame as the controller port reads them.
fn frame(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

/// Sends a Heartbeat for a made-up broker, as the review did, and returns every byte the
/// port sent back before it closed the connection (or stopped for 3 s).
fn pose_as_a_broker(port: u16, first: Option<&[u8]>) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    if let Some(first) = first {
        s.write_all(first).unwrap();
    }
    let heartbeat = r#"{"Heartbeat":{"id":7,"incarnation":"posing","host":"127.0.0.1","port":1,"endpoints":[],"known_version":0,"leaving":false}}"#;
    let _ = s.write_all(&frame(heartbeat));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[test]
fn a_single_nodes_controller_port_serves_no_one_without_its_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = common::serve(&tmp.path().join("data"));
    common::laminar(&[
        "users",
        "alter",
        "--user",
        "alice",
        "--password",
        "alice-secret",
        "--bootstrap",
        &broker.addr,
    ]);
    let kafka_port: u16 = broker.addr.rsplit(':').next().unwrap().parse().unwrap();
    let others: Vec<u16> = listening_ports(broker.child.id())
        .into_iter()
        .filter(|p| *p != kafka_port)
        .collect();
    assert!(
        !others.is_empty(),
        "the controller port listens (and the metrics')"
    );
    let mut challenged = 0;
    for port in others {
        // Straight away, and after a made-up proof.
        let proof = frame(r#"{"proof":"00","challenge":"11"}"#);
        for first in [None, Some(proof.as_slice())] {
            let got = String::from_utf8_lossy(&pose_as_a_broker(port, first)).to_string();
            assert!(
                !got.contains("scram") && !got.contains("Heartbeat") && !got.contains("fenced"),
                "port {port} answered a posing broker: {got}"
            );
            challenged += got.contains("\"challenge\"") as usize;
        }
    }
    assert_eq!(challenged, 2, "the controller port challenged both tries");
    // And the broker itself still uses it: it carries on registered.
    common::create_topic(&broker.addr, "after", 1);
    broker.terminate();
    // Issue 41, item 10: what holds the SCRAM keys (the cluster metadata), and every other
    // file the broker made, is readable by its user alone.
    let mut files = vec![tmp.path().join("data")];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path).unwrap();
        if meta.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            seen += 1;
            let mode = meta.permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} has mode {mode:o}", path.display());
        }
    }
    assert!(seen > 3, "the data directory holds the broker's files");
}

/// A broker with `settings`, its stderr and whether it was still running after `wait`.
fn run_for(data: &Path, settings: &[String], wait: Duration) -> (String, bool) {
    let mut args = vec![
        "serve".to_string(),
        "--metrics-listen".into(),
        "none".into(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    for s in settings {
        args.extend(["--set".to_string(), s.clone()]);
    }
    let log = data.with_extension("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(&args)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let until = Instant::now() + wait;
    let mut running = true;
    while Instant::now() < until {
        if child.try_wait().unwrap().is_some() {
            running = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if running {
        let _ = child.kill();
    }
    let _ = child.wait();
    (std::fs::read_to_string(&log).unwrap_or_default(), running)
}

#[test]
fn a_cluster_admits_only_brokers_with_its_secret_and_an_open_port_does_not_start_with_an_authorizer() {
    let tmp = tempfile::tempdir().unwrap();
    let (controller_port, listen) = (common::free_port(), common::free_port());
    let voters = format!("controller.quorum.voters=1@127.0.0.1:{controller_port}");
    // An open controller port and an authorizer: it does not start.
    let authorizer = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";
    let (said, running) = run_for(
        &tmp.path().join("open"),
        &[
            "node.id=1".into(),
            voters.clone(),
            format!("listeners=127.0.0.1:{listen}"),
            authorizer.into(),
        ],
        Duration::from_secs(10),
    );
    assert!(!running, "it stopped: {said}");
    assert!(said.contains("would take any peer that reaches it"), "{said}");

    // A cluster of one voter with a secret; a broker with another secret is not admitted,
    // one with the same is.
    let (right, wrong) = (tmp.path().join("right.secret"), tmp.path().join("wrong.secret"));
    common::write_secret(&right, "0123456789abcdef0123456789abcdef");
    common::write_secret(&wrong, "fedcba9876543210fedcba9876543210");
    let node = |id: i32, secret: &Path, listen: u16| -> Vec<String> {
        vec![
            format!("node.id={id}"),
            voters.clone(),
            format!("controller.quorum.secret.file={}", secret.display()),
            format!("listeners=127.0.0.1:{listen}"),
            "broker.heartbeat.interval.ms=300".into(),
        ]
    };
    let args = |settings: Vec<String>| -> Vec<String> {
        settings
            .into_iter()
            .flat_map(|s| ["--set".to_string(), s])
            .collect()
    };
    let first = args(node(1, &right, listen));
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let voter = common::try_serve_args(&tmp.path().join("node1"), &first).expect("the voter starts");
    let brokers = || common::laminar(&["cluster", "describe", "--bootstrap", &voter.addr]);
    let (outsider_said, _) = run_for(
        &tmp.path().join("node2-wrong"),
        &node(2, &wrong, common::free_port()),
        Duration::from_secs(4),
    );
    assert!(
        !brokers().contains("broker 2"),
        "a broker without the secret registered: {}",
        brokers()
    );
    assert!(
        outsider_said.contains("does not hold the cluster's secret") || outsider_said.contains("controller"),
        "{outsider_said}"
    );
    let member = args(node(2, &right, common::free_port()));
    let member: Vec<&str> = member.iter().map(String::as_str).collect();
    let second = common::try_serve_args(&tmp.path().join("node2"), &member).expect("the broker starts");
    let until = Instant::now() + Duration::from_secs(20);
    while !brokers().contains("broker 2") {
        assert!(
            Instant::now() < until,
            "the broker with the secret registered: {}",
            brokers()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    second.terminate();
    voter.terminate();
}

/// `laminar acls list` against `addr`, given at most `within`: its output, or `None` if it
/// had no answer by then.
fn acls_within(addr: &str, within: Duration) -> Option<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_laminar"))
        .args(["acls", "list", "--bootstrap", addr])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            return status.success().then_some(out);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Issue 41, hole 7: a broker of a cluster serves clients only once the active controller
/// has answered it, so never with an image that lacks the cluster's ACLs. (Before, a broker
/// started from an empty image and, with allow.everyone.if.no.acl.found, every DENY was
/// missing until its first heartbeat's answer.) The controller is frozen while a second
/// broker starts: that broker answers nothing until the controller is back, and then
/// answers with the DENY.
#[test]
fn a_cluster_broker_serves_only_once_it_has_the_controllers_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("controller.secret");
    common::write_secret(&secret, "0123456789abcdef0123456789abcdef");
    let voters = format!("controller.quorum.voters=1@127.0.0.1:{}", common::free_port());
    let node = |id: i32, listen: u16| -> Vec<String> {
        [
            format!("node.id={id}"),
            voters.clone(),
            format!("controller.quorum.secret.file={}", secret.display()),
            format!("listeners=127.0.0.1:{listen}"),
            "broker.heartbeat.interval.ms=300".into(),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
            "allow.everyone.if.no.acl.found=true".into(),
            "super.users=User:ANONYMOUS".into(),
        ]
        .into_iter()
        .flat_map(|s| ["--set".to_string(), s])
        .collect()
    };
    let first = node(1, common::free_port());
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let voter = common::try_serve_args(&tmp.path().join("node1"), &first).expect("the voter starts");
    common::laminar(&[
        "acls",
        "add",
        "--deny-principal",
        "User:alice",
        "--operation",
        "Create",
        "--cluster",
        "--bootstrap",
        &voter.addr,
    ]);
    assert!(acls_within(&voter.addr, Duration::from_secs(10))
        .unwrap()
        .contains("User:alice DENY Create"));

    voter.freeze();
    let listen = common::free_port();
    let second_addr = format!("127.0.0.1:{listen}");
    let second = Stopped(
        Command::new(env!("CARGO_BIN_EXE_laminar"))
            .args(["serve", "--metrics-listen", "none", "--data-dir"])
            .arg(tmp.path().join("node2"))
            .args(node(2, listen))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    match acls_within(&second_addr, Duration::from_secs(4)) {
        None => {}
        Some(out) => assert!(
            out.contains("User:alice DENY Create"),
            "the second broker answered without the cluster's ACLs: {out:?}"
        ),
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(voter.child.id() as i32, libc::SIGCONT) };
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(out) = acls_within(&second_addr, Duration::from_secs(5)) {
            assert!(out.contains("User:alice DENY Create"), "{out}");
            break;
        }
        assert!(
            Instant::now() < until,
            "the second broker serves once the controller answers"
        );
    }
    drop(second);
    voter.terminate();
}

/// A child process killed when this goes, a failed assertion included.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! Issue 41, item 3: kernel TLS, tested on a kernel that has it. This machine's kernel is
//! built without `CONFIG_TLS`, so the test boots Debian's cloud kernel (it has `tls` as a
//! module) under qemu, in software emulation, with Laminar inside (`tests/vm/`): its SSL
//! listener with `ssl.ktls.enable` is forwarded to the host by qemu's user networking, and
//! its data is on an ext4 disk. From the host, librdkafka over TLS produces 192 MiB into
//! 16 MiB segments and fetches all of it back, every byte compared, with the guest's page
//! cache dropped half-way (the second half goes out cold, read on the I/O pool); the broker's
//! metrics show every connection's keys went to the kernel and the resident data out with
//! `sendfile`. Then a raw rustls client sends a TLS 1.3 KeyUpdate: the guest's kernel (6.1)
//! cannot follow one, so the broker closes that connection, and a new one is served.
//!
//! Needs qemu-system-x86_64, mkfs.ext4, and Debian's package index for the kernel
//! (`scripts/test` installs what is missing; the kernel is fetched once, into target/tmp).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::free_port;
use common::pki::certificates;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const RECORD_BYTES: usize = 64 << 10;
/// 192 MiB.
const RECORDS: usize = 3072;

/// Record `i`'s value: 64 KiB no compression would shrink, different for every record.
fn payload(i: usize) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut v = Vec::with_capacity(RECORD_BYTES + 8);
    while v.len() < RECORD_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(RECORD_BYTES);
    v
}

/// The VM (run-vm.sh), stopped when the test ends however it ends.
struct Vm(Child);

impl Drop for Vm {
    fn drop(&mut self) {
        // SIGTERM: run-vm.sh stops qemu and removes its files.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kernel_tls_serves_every_byte_hot_and_cold_and_a_key_update_closes_the_connection() {
    let vm_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ktls-vm");
    let scripts = common::repo_root().join("crates/laminar/tests/vm");
    let setup = Command::new(scripts.join("setup.sh"))
        .arg(&vm_dir)
        .status()
        .unwrap();
    assert!(setup.success(), "tests/vm/setup.sh: the kernel and busybox");

    let tmp = tempfile::tempdir().unwrap();
    let disk = tmp.path().join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(1 << 30).unwrap();
    let path = format!("{}:/usr/sbin:/sbin", std::env::var("PATH").unwrap_or_default());
    let mkfs = Command::new("mkfs.ext4")
        .env("PATH", &path)
        .args(["-q", "-F"])
        .arg(&disk)
        .status()
        .unwrap();
    assert!(mkfs.success());
    let (keystore, ca) = certificates(tmp.path());
    let (kafka_port, metrics_port, drop_port) = (free_port(), free_port(), free_port());
    let config = tmp.path().join("laminar.toml");
    std::fs::write(
        &config,
        format!(
            r#""listeners" = "SSL://0.0.0.0:9093,PLAINTEXT://127.0.0.1:9092"
"advertised.listeners" = "SSL://127.0.0.1:{kafka_port},PLAINTEXT://127.0.0.1:9092"
"inter.broker.listener.name" = "PLAINTEXT"
"ssl.keystore.type" = "PEM"
"ssl.keystore.location" = "/etc/laminar/keystore.pem"
"ssl.ktls.enable" = "true"
"log.segment.bytes" = "16777216"
"#
        ),
    )
    .unwrap();
    let console = tmp.path().join("console.log");
    let mut vm = Vm(Command::new(scripts.join("run-vm.sh"))
        .env("KTLS_VM_DIR", &vm_dir)
        .args(["--timeout", "1200", "--mem", "1536"])
        .args(["--forward", &format!("{kafka_port}:9093")])
        .args(["--forward", &format!("{metrics_port}:9100")])
        .args(["--forward", &format!("{drop_port}:9101")])
        .args([
            "--file",
            &format!("{}:/usr/local/bin/laminar", env!("CARGO_BIN_EXE_laminar")),
        ])
        .args([
            "--file",
            &format!("{}:/etc/laminar/laminar.toml", config.display()),
        ])
        .args([
            "--file",
            &format!("{}:/etc/laminar/keystore.pem", keystore.display()),
        ])
        .arg("--disk")
        .arg(&disk)
        .arg("--log")
        .arg(&console)
        .arg(scripts.join("laminar-guest.sh"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let said = || std::fs::read_to_string(&console).unwrap_or_default();
    let bootstrap = format!("127.0.0.1:{kafka_port}");
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut tls = ClientConfig::new();
    tls.set("bootstrap.servers", &bootstrap)
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", ca.to_str().unwrap());

    // The broker in the VM answers (a software-emulated boot and start take a while).
    let probe: BaseConsumer = tls.create().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while probe.fetch_metadata(None, Duration::from_secs(5)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the broker in the VM never answered:\n{}",
            said()
        );
        assert!(vm.0.try_wait().unwrap().is_none(), "the VM stopped:\n{}", said());
    }
    drop(probe);
    assert!(said().contains("tcp_available_ulp=[mptcp tls]"), "{}", said());

    // 192 MiB through kernel TLS.
    let started = Instant::now();
    let producer: ThreadedProducer<DefaultProducerContext> = tls
        .clone()
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("batch.size", "1048576")
        .set("message.timeout.ms", "300000")
        .create()
        .unwrap();
    for i in 0..RECORDS {
        let value = payload(i);
        let mut record = BaseRecord::<(), [u8]>::to("big").partition(0).payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(50));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(300)).unwrap();
    let produced_s = started.elapsed().as_secs_f64();
    drop(producer);

    // Back from offset 0, 1 MiB a fetch and little read ahead, so that the second half is
    // fetched after the page cache is dropped.
    let consumer: BaseConsumer = tls
        .clone()
        .set("group.id", "ktls")
        .set("enable.auto.commit", "false")
        .set("max.partition.fetch.bytes", "1048576")
        .set("fetch.max.bytes", "1048576")
        .set("queued.max.messages.kbytes", "2048")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("big", 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let started = Instant::now();
    let mut next = 0usize;
    let deadline = Instant::now() + Duration::from_secs(600);
    while next < RECORDS {
        assert!(Instant::now() < deadline, "read {next} of {RECORDS} records");
        let Some(m) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let m = m.unwrap();
        assert_eq!(m.offset(), next as i64, "records in order, none missing");
        assert!(
            m.payload() == Some(&payload(next)[..]),
            "record {next}: its bytes differ"
        );
        next += 1;
        if next == RECORDS / 2 {
            // Half-way: the guest drops its page cache.
            drop(TcpStream::connect(format!("127.0.0.1:{drop_port}")).unwrap());
            let dropped = Instant::now() + Duration::from_secs(30);
            while !said().contains("KTLSVM: page cache dropped") {
                assert!(Instant::now() < dropped, "no page cache drop:\n{}", said());
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let consumed_s = started.elapsed().as_secs_f64();
    drop(consumer);
    let value = |name: &str| common::metric_at(&metrics, name).unwrap_or(-1.0);
    let kernel = value("laminar_ktls_connections_total");
    let fallbacks = value("laminar_ktls_fallbacks_total");
    let sendfiles = value("laminar_disk_call_seconds_count{call=\"sendfile\"}");
    let cold = value("laminar_disk_call_seconds_count{call=\"cold_read\"}");
    eprintln!(
        "ktls_vm: produced 192 MiB in {produced_s:.1} s, consumed in {consumed_s:.1} s; \
         kernel TLS connections {kernel}, fallbacks {fallbacks}, sendfile calls {sendfiles}, cold reads {cold}"
    );
    assert!(
        kernel >= 3.0 && fallbacks == 0.0,
        "kernel {kernel}, fallbacks {fallbacks}"
    );
    assert!(
        sendfiles > 0.0,
        "resident data went out with sendfile: {sendfiles}"
    );
    assert!(cold > 0.0, "data read cold after the drop: {cold}");

    // A TLS 1.3 KeyUpdate: the kernel cannot take the new key; the connection is closed.
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(&ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connect = || {
        let conn = rustls::ClientConnection::new(config.clone(), name.clone()).unwrap();
        let tcp = TcpStream::connect(&bootstrap).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    };
    let mut s = connect();
    assert!(api_versions(&mut s, 1).is_ok(), "served over kernel TLS");
    s.conn.refresh_traffic_keys().unwrap();
    let after = api_versions(&mut s, 2);
    assert!(
        after.is_err(),
        "answered after a KeyUpdate the kernel cannot follow: {after:?}"
    );
    let mut again = connect();
    assert!(api_versions(&mut again, 3).is_ok(), "a new connection is served");
    drop(vm);
}

/// An ApiVersions v0 request and its answer's length, over `s`.
fn api_versions(s: &mut impl ReadWrite, correlation_id: i32) -> std::io::Result<usize> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&10i32.to_be_bytes());
    frame.extend_from_slice(&18i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    s.write_all(&frame)?;
    s.flush()?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size)?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body)?;
    assert_eq!(body[..4], correlation_id.to_be_bytes());
    Ok(body.len())
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

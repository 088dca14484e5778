//! A broker per test: its own ephemeral port on 127.0.0.1 and its own temporary data
//! directory, stopped when the test ends.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use laminar_broker::{BrokerConfig, RunningBroker};

pub struct TestBroker {
    pub addr: String,
    pub dir: PathBuf,
    runtime: Option<tokio::runtime::Runtime>,
    broker: Option<RunningBroker>,
    _tmp: Option<tempfile::TempDir>,
}

impl TestBroker {
    pub fn start() -> TestBroker {
        Self::start_with(|_| {})
    }

    pub fn start_with(f: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut b = Self::start_in(dir, f);
        b._tmp = Some(tmp);
        b
    }

    pub fn start_in(dir: PathBuf, f: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        let mut config = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.clone(),
            ..Default::default()
        };
        f(&mut config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.num_network_threads)
            .enable_all()
            .build()
            .unwrap();
        let broker = runtime
            .block_on(RunningBroker::start(config))
            .expect("broker starts");
        let addr = broker.local_addr().to_string();
        TestBroker {
            addr,
            dir,
            runtime: Some(runtime),
            broker: Some(broker),
            _tmp: None,
        }
    }

    /// Clean shutdown, keeping the data directory (for restart tests).
    pub fn stop(mut self) -> (PathBuf, Option<tempfile::TempDir>) {
        self.shutdown();
        (self.dir.clone(), self._tmp.take())
    }

    fn shutdown(&mut self) {
        if let (Some(rt), Some(b)) = (self.runtime.as_ref(), self.broker.take()) {
            rt.block_on(b.shutdown()).expect("clean shutdown");
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

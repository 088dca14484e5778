//! A test CA with rcgen: the broker's PEM keystore for 127.0.0.1 and localhost, and client
//! certificates, for the tests of TLS listeners.

use std::path::{Path, PathBuf};

/// A CA, and a broker certificate it signed for 127.0.0.1 and localhost. Returns the
/// keystore (the broker's key and certificate chain, one PEM file) and the CA's certificate.
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf) {
    let pki = Pki::new(dir);
    (pki.keystore.clone(), pki.ca_file.clone())
}

/// A test CA that signs the broker's certificate and clients' certificates.
pub struct Pki {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    dir: PathBuf,
    pub keystore: PathBuf,
    pub ca_file: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Laminar test CA");
        let ca = ca.self_signed(&ca_key).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        let mut pki = Pki {
            ca,
            ca_key,
            dir: dir.to_path_buf(),
            keystore: dir.join("broker.pem"),
            ca_file,
        };
        let (cert, key) = pki.issue(
            &[(rcgen::DnType::CommonName, "localhost")],
            &["localhost", "127.0.0.1"],
        );
        std::fs::write(&pki.keystore, format!("{key}{cert}{}", pki.ca.pem())).unwrap();
        pki.keystore = pki.keystore.clone();
        pki
    }

    /// A certificate with this subject (and names), signed by the CA: (certificate, key) PEM.
    pub fn issue(&self, subject: &[(rcgen::DnType, &str)], names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        for (t, v) in subject {
            params.distinguished_name.push(t.clone(), *v);
        }
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate and its key, as files.
    pub fn client(&self, name: &str, subject: &[(rcgen::DnType, &str)]) -> (PathBuf, PathBuf) {
        let (cert, key) = self.issue(subject, &[]);
        let (c, k) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert).unwrap();
        std::fs::write(&k, key).unwrap();
        (c, k)
    }
}

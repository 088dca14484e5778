//! The controller quorum's voters: `controller.quorum.voters`.

use crate::image::BrokerId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: BrokerId,
    pub addr: String,
}

/// `controller.quorum.voters`: `1@host:port,2@host:port,...`.
pub fn parse_voters(value: &str) -> Result<Vec<Voter>, String> {
    let mut voters: Vec<Voter> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, addr) = item
            .split_once('@')
            .ok_or(format!("controller.quorum.voters: {item:?} is not id@host:port"))?;
        let id: BrokerId = id
            .parse()
            .ok()
            .filter(|id| *id >= 0)
            .map(BrokerId)
            .ok_or(format!("controller.quorum.voters: {id:?} is not a node id"))?;
        if addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            return Err(format!("controller.quorum.voters: {addr:?} is not host:port"));
        }
        if voters.iter().any(|v| v.id == id) {
            return Err(format!("controller.quorum.voters: node {id} is listed twice"));
        }
        voters.push(Voter {
            id,
            addr: addr.to_string(),
        });
    }
    Ok(voters)
}

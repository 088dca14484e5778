//! Dynamic broker configs, as Kafka has them: settings changed while the broker runs with
//! IncrementalAlterConfigs or AlterConfigs on a broker resource (`kafka-configs
//! --entity-type brokers --entity-name 0` for this broker, `--entity-default` for the
//! cluster-wide default), held in the cluster metadata, so that they survive a restart and
//! every broker sees the same. What is in effect: this broker's dynamic value, else the
//! cluster default's, else `laminar.toml`'s (static), else the built-in default.
//!
//! Only the topic defaults are dynamic (as Kafka's `log.*` defaults are): a change applies
//! at once to every topic that has no override of its own. The rest (threads, listeners,
//! limits) are read at start and refused here with the reason.

use crate::config::BrokerConfig;

pub use laminar_cluster::dynamic::{DynamicConfigs, Level, DYNAMIC_SETTINGS};

/// The settings in effect under a set of dynamic configs.
pub trait EffectiveConfig {
    /// The settings in effect: `static_config` with the cluster default's values, then this
    /// broker's, applied over it. Fails on a setting that is not dynamic or a bad value.
    fn effective(&self, static_config: &BrokerConfig) -> Result<BrokerConfig, String>;
}

impl EffectiveConfig for DynamicConfigs {
    fn effective(&self, static_config: &BrokerConfig) -> Result<BrokerConfig, String> {
        let mut c = static_config.clone();
        for (k, v) in self.cluster_default.iter().chain(&self.broker) {
            if !DYNAMIC_SETTINGS.contains(&k.as_str()) {
                return Err(format!(
                    "{k} cannot be changed while the broker runs: set it in its config file \
                     (laminar serve --config); dynamic: {}",
                    DYNAMIC_SETTINGS.join(", ")
                ));
            }
            c.set_value(k, v)?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_brokers_value_wins_over_the_cluster_default_over_the_file() {
        let mut file = BrokerConfig::default();
        file.set("log.retention.ms", "1000").unwrap();
        let mut d = DynamicConfigs::default();
        assert_eq!(d.effective(&file).unwrap().log_retention_ms, Some(1000));
        d.cluster_default.insert("log.retention.ms".into(), "2000".into());
        assert_eq!(d.effective(&file).unwrap().log_retention_ms, Some(2000));
        d.broker.insert("log.retention.ms".into(), "3000".into());
        assert_eq!(d.effective(&file).unwrap().log_retention_ms, Some(3000));
        // Still static as far as the file goes.
        assert!(d.effective(&file).unwrap().set_names.contains("log.retention.ms"));
    }

    #[test]
    fn static_settings_and_bad_values_are_refused() {
        let mut d = DynamicConfigs::default();
        d.broker.insert("num.io.threads".into(), "8".into());
        let e = d.effective(&BrokerConfig::default()).unwrap_err();
        assert!(e.contains("config file"), "{e}");
        let mut d = DynamicConfigs::default();
        d.broker.insert("log.segment.bytes".into(), "lots".into());
        assert!(d.effective(&BrokerConfig::default()).is_err());
    }
}

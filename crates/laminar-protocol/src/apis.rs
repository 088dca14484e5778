//! The APIs Laminar serves, with their version ranges. This table is what ApiVersions
//! advertises, and what the decoder accepts. Floors follow Kafka 4 (Produce v3, Fetch v4).

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ApiKey {
    Produce = 0,
    Fetch = 1,
    ListOffsets = 2,
    Metadata = 3,
    ApiVersions = 18,
    CreateTopics = 19,
    DeleteTopics = 20,
    InitProducerId = 22,
    DescribeConfigs = 32,
    CreatePartitions = 37,
    OffsetCommit = 8,
    OffsetFetch = 9,
    FindCoordinator = 10,
    JoinGroup = 11,
    Heartbeat = 12,
    LeaveGroup = 13,
    SyncGroup = 14,
    DescribeGroups = 15,
    ListGroups = 16,
    DeleteGroups = 42,
    OffsetDelete = 47,
    DescribeClientQuotas = 48,
    AlterClientQuotas = 49,
    DescribeLogDirs = 35,
    DescribeCluster = 60,
    OffsetForLeaderEpoch = 23,
    AlterConfigs = 33,
    IncrementalAlterConfigs = 44,
    ElectLeaders = 43,
    AlterPartitionReassignments = 45,
    ListPartitionReassignments = 46,
    DescribeProducers = 61,
    DeleteRecords = 21,
    AddPartitionsToTxn = 24,
    AddOffsetsToTxn = 25,
    EndTxn = 26,
    TxnOffsetCommit = 28,
    WriteTxnMarkers = 27,
    DescribeTransactions = 65,
    ListTransactions = 66,
    SaslHandshake = 17,
    SaslAuthenticate = 36,
    DescribeUserScramCredentials = 50,
    AlterUserScramCredentials = 51,
    DescribeAcls = 29,
    CreateAcls = 30,
    DeleteAcls = 31,
}

pub struct ApiSpec {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    /// The first version that uses flexible (compact, tagged) encoding.
    pub first_flexible: i16,
}

pub const API_TABLE: &[ApiSpec] = &[
    ApiSpec {
        key: ApiKey::Produce,
        min_version: 3,
        max_version: 13,
        first_flexible: 9,
    },
    ApiSpec {
        key: ApiKey::Fetch,
        min_version: 4,
        max_version: 18,
        first_flexible: 12,
    },
    ApiSpec {
        key: ApiKey::ListOffsets,
        min_version: 1,
        max_version: 11,
        first_flexible: 6,
    },
    ApiSpec {
        key: ApiKey::Metadata,
        min_version: 0,
        max_version: 13,
        first_flexible: 9,
    },
    ApiSpec {
        key: ApiKey::ApiVersions,
        min_version: 0,
        max_version: 4,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::CreateTopics,
        min_version: 2,
        max_version: 7,
        first_flexible: 5,
    },
    ApiSpec {
        key: ApiKey::DeleteTopics,
        min_version: 1,
        max_version: 6,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::InitProducerId,
        min_version: 0,
        max_version: 5,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::DescribeConfigs,
        min_version: 1,
        max_version: 4,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::CreatePartitions,
        min_version: 0,
        max_version: 3,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::OffsetCommit,
        min_version: 2,
        max_version: 9,
        first_flexible: 8,
    },
    ApiSpec {
        key: ApiKey::OffsetFetch,
        min_version: 1,
        max_version: 9,
        first_flexible: 6,
    },
    ApiSpec {
        key: ApiKey::FindCoordinator,
        min_version: 0,
        max_version: 6,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::JoinGroup,
        min_version: 0,
        max_version: 9,
        first_flexible: 6,
    },
    ApiSpec {
        key: ApiKey::Heartbeat,
        min_version: 0,
        max_version: 4,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::LeaveGroup,
        min_version: 0,
        max_version: 5,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::SyncGroup,
        min_version: 0,
        max_version: 5,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::DescribeGroups,
        min_version: 0,
        max_version: 6,
        first_flexible: 5,
    },
    ApiSpec {
        key: ApiKey::ListGroups,
        min_version: 0,
        max_version: 5,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::DeleteGroups,
        min_version: 0,
        max_version: 2,
        first_flexible: 2,
    },
    // OffsetDelete has only v0, which is not flexible.
    ApiSpec {
        key: ApiKey::OffsetDelete,
        min_version: 0,
        max_version: 0,
        first_flexible: i16::MAX,
    },
    ApiSpec {
        key: ApiKey::DescribeClientQuotas,
        min_version: 0,
        max_version: 1,
        first_flexible: 1,
    },
    ApiSpec {
        key: ApiKey::AlterClientQuotas,
        min_version: 0,
        max_version: 1,
        first_flexible: 1,
    },
    ApiSpec {
        key: ApiKey::DescribeLogDirs,
        min_version: 1,
        max_version: 4,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::DescribeCluster,
        min_version: 0,
        max_version: 2,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::OffsetForLeaderEpoch,
        min_version: 2,
        max_version: 4,
        first_flexible: 4,
    },
    ApiSpec {
        key: ApiKey::AlterConfigs,
        min_version: 0,
        max_version: 2,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::IncrementalAlterConfigs,
        min_version: 0,
        max_version: 1,
        first_flexible: 1,
    },
    ApiSpec {
        key: ApiKey::ElectLeaders,
        min_version: 0,
        max_version: 2,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::AlterPartitionReassignments,
        min_version: 0,
        max_version: 1,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::ListPartitionReassignments,
        min_version: 0,
        max_version: 0,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::DescribeProducers,
        min_version: 0,
        max_version: 0,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::DeleteRecords,
        min_version: 0,
        max_version: 2,
        first_flexible: 2,
    },
    // Transactions, with transaction.version 2 (KIP-890: Produce v12, EndTxn v5 and
    // TxnOffsetCommit v5 add partitions implicitly and bump the epoch per transaction) and
    // without it. v4 and v5 of AddPartitionsToTxn are for brokers: a partition leader asks
    // the coordinator whether a transactional batch's partition is in its transaction.
    ApiSpec {
        key: ApiKey::AddPartitionsToTxn,
        min_version: 0,
        max_version: 5,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::AddOffsetsToTxn,
        min_version: 0,
        max_version: 4,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::EndTxn,
        min_version: 0,
        max_version: 5,
        first_flexible: 3,
    },
    ApiSpec {
        key: ApiKey::TxnOffsetCommit,
        min_version: 0,
        max_version: 5,
        first_flexible: 3,
    },
    // Brokers send it to partition leaders; the Admin client's abortTransaction too
    // (`kafka-transactions abort`), for a hanging transaction.
    ApiSpec {
        key: ApiKey::WriteTxnMarkers,
        min_version: 1,
        max_version: 2,
        first_flexible: 1,
    },
    ApiSpec {
        key: ApiKey::DescribeTransactions,
        min_version: 0,
        max_version: 0,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::ListTransactions,
        min_version: 0,
        max_version: 2,
        first_flexible: 0,
    },
    // From v1 the SASL exchange goes in SaslAuthenticate requests (KIP-152); after v0 it goes
    // in bare length-framed tokens. librdkafka before 2.x (Debian 12's 2.0.2 among them)
    // turns SASL on only when v0 is in the range, even though it then sends v1.
    ApiSpec {
        key: ApiKey::SaslHandshake,
        min_version: 0,
        max_version: 1,
        first_flexible: i16::MAX,
    },
    ApiSpec {
        key: ApiKey::SaslAuthenticate,
        min_version: 0,
        max_version: 2,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::DescribeUserScramCredentials,
        min_version: 0,
        max_version: 0,
        first_flexible: 0,
    },
    ApiSpec {
        key: ApiKey::AlterUserScramCredentials,
        min_version: 0,
        max_version: 0,
        first_flexible: 0,
    },
    // Kafka 4 removed v0 (no pattern types) of the three.
    ApiSpec {
        key: ApiKey::DescribeAcls,
        min_version: 1,
        max_version: 3,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::CreateAcls,
        min_version: 1,
        max_version: 3,
        first_flexible: 2,
    },
    ApiSpec {
        key: ApiKey::DeleteAcls,
        min_version: 1,
        max_version: 3,
        first_flexible: 2,
    },
];

impl ApiKey {
    pub fn from_i16(key: i16) -> Option<ApiKey> {
        API_TABLE.iter().map(|s| s.key).find(|k| *k as i16 == key)
    }

    /// Every key has exactly one entry in the table (checked by a test below).
    pub fn spec(self) -> &'static ApiSpec {
        API_TABLE
            .iter()
            .find(|s| s.key == self)
            .expect("every key is in the table")
    }

    /// The API's name as Kafka's schemas spell it.
    pub fn name(self) -> &'static str {
        match self {
            ApiKey::Produce => "Produce",
            ApiKey::Fetch => "Fetch",
            ApiKey::ListOffsets => "ListOffsets",
            ApiKey::Metadata => "Metadata",
            ApiKey::ApiVersions => "ApiVersions",
            ApiKey::CreateTopics => "CreateTopics",
            ApiKey::DeleteTopics => "DeleteTopics",
            ApiKey::InitProducerId => "InitProducerId",
            ApiKey::DescribeConfigs => "DescribeConfigs",
            ApiKey::CreatePartitions => "CreatePartitions",
            ApiKey::OffsetCommit => "OffsetCommit",
            ApiKey::OffsetFetch => "OffsetFetch",
            ApiKey::FindCoordinator => "FindCoordinator",
            ApiKey::JoinGroup => "JoinGroup",
            ApiKey::Heartbeat => "Heartbeat",
            ApiKey::LeaveGroup => "LeaveGroup",
            ApiKey::SyncGroup => "SyncGroup",
            ApiKey::DescribeGroups => "DescribeGroups",
            ApiKey::ListGroups => "ListGroups",
            ApiKey::DeleteGroups => "DeleteGroups",
            ApiKey::OffsetDelete => "OffsetDelete",
            ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
            ApiKey::AlterClientQuotas => "AlterClientQuotas",
            ApiKey::DescribeLogDirs => "DescribeLogDirs",
            ApiKey::DescribeCluster => "DescribeCluster",
            ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
            ApiKey::AlterConfigs => "AlterConfigs",
            ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
            ApiKey::ElectLeaders => "ElectLeaders",
            ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
            ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
            ApiKey::DescribeProducers => "DescribeProducers",
            ApiKey::DeleteRecords => "DeleteRecords",
            ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
            ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
            ApiKey::EndTxn => "EndTxn",
            ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
            ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
            ApiKey::DescribeTransactions => "DescribeTransactions",
            ApiKey::ListTransactions => "ListTransactions",
            ApiKey::SaslHandshake => "SaslHandshake",
            ApiKey::SaslAuthenticate => "SaslAuthenticate",
            ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
            ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
            ApiKey::DescribeAcls => "DescribeAcls",
            ApiKey::CreateAcls => "CreateAcls",
            ApiKey::DeleteAcls => "DeleteAcls",
        }
    }

    pub fn is_flexible(self, version: i16) -> bool {
        version >= self.spec().first_flexible
    }

    pub fn supports(self, version: i16) -> bool {
        let s = self.spec();
        (s.min_version..=s.max_version).contains(&version)
    }

    /// Response header v1 (with tagged fields) for flexible versions, except ApiVersions,
    /// whose response header is always v0 so that any client can read it.
    pub fn response_header_flexible(self, version: i16) -> bool {
        self != ApiKey::ApiVersions && self.is_flexible(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_one_table_entry() {
        for s in API_TABLE {
            assert_eq!(
                API_TABLE.iter().filter(|o| o.key == s.key).count(),
                1,
                "{:?}",
                s.key
            );
            assert_eq!(ApiKey::from_i16(s.key as i16), Some(s.key));
            assert!(s.min_version <= s.max_version);
        }
        assert_eq!(API_TABLE.len(), 47);
    }
}

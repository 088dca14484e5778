//! Reads a whole history and names every anomaly in it. The final read-back is the log as it
//! stands; everything else that was observed (acknowledgements, transactions, every poll) must
//! agree with it and with itself:
//!
//! - **lost**: a record acknowledged, in a committed transaction, or polled by a consumer, and
//!   not in the final read (Jepsen counts a read write as written);
//! - **duplicated**: one record at more than one offset;
//! - **inconsistent offset**: one offset seen holding two different records (by an
//!   acknowledgement, a poll or the final read): an offset reused after a crash;
//! - **reordered**: a producer's acknowledged records in one partition not in the order sent;
//! - **non-monotonic poll**: a consumer polling an offset at or below one it already polled in
//!   the same assignment of that partition;
//! - **skipped poll**: a consumer's consecutive polls of a partition stepping over an offset
//!   that holds a visible record;
//! - **aborted read**: a record of a transaction its producer aborted, read by anyone;
//! - **torn transaction**: a transaction that did not abort, partly visible in the final read;
//! - **corrupted**: a record read that is not one this run wrote intact.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::{writer_of, Event, Outcome, Value, Writer, FENCE_WRITER};

/// Anomalies of each kind shown with their details.
const EXAMPLES_PER_KIND: usize = 5;

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Report {
    pub acked: u64,
    pub unacked: u64,
    pub txns_committed: u64,
    pub txns_aborted: u64,
    pub txns_unknown: u64,
    pub polled: u64,
    pub final_records: u64,
    /// Consumer assignments seen (each starts a session per partition).
    pub assignments: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub inconsistent_offsets: u64,
    pub reordered: u64,
    pub nonmonotonic_polls: u64,
    pub skipped_polls: u64,
    pub aborted_reads: u64,
    pub torn_txns: u64,
    pub corrupted: u64,
    /// Every anomaly found, of every kind ([`Report::anomalies`]), for scripts reading the JSON.
    pub total_anomalies: u64,
    /// The first few anomalies of each kind, described.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

impl Report {
    /// Every anomaly found, of every kind.
    pub fn anomalies(&self) -> u64 {
        self.lost
            + self.duplicated
            + self.inconsistent_offsets
            + self.reordered
            + self.nonmonotonic_polls
            + self.skipped_polls
            + self.aborted_reads
            + self.torn_txns
            + self.corrupted
    }

    fn example(&mut self, shown: &mut HashMap<&'static str, usize>, kind: &'static str, text: String) {
        let n = shown.entry(kind).or_default();
        if *n < EXAMPLES_PER_KIND {
            *n += 1;
            self.examples.push(format!("{kind}: {text}"));
        }
    }
}

type Place = (i32, i64);

pub fn check(events: &[Event]) -> Report {
    let mut r = Report::default();
    let mut shown = HashMap::new();
    let fence = |v: &Value| writer_of(*v) == FENCE_WRITER;

    // The log as it stands, and where each record is in it.
    let mut final_at: HashMap<Place, Option<Value>> = HashMap::new();
    let mut final_where: HashMap<Value, Vec<Place>> = HashMap::new();
    // Every record seen at every offset, by anyone, and every offset each record was seen at.
    let mut seen_at: BTreeMap<Place, HashSet<Value>> = BTreeMap::new();
    let mut read_where: HashMap<Value, HashSet<Place>> = HashMap::new();
    // Records that must be in the log: acknowledged, committed, or read.
    let mut must_exist: HashMap<Value, &'static str> = HashMap::new();
    let mut aborted: HashSet<Value> = HashSet::new();
    let mut acked_by: HashMap<(Writer, i32), Vec<Value>> = HashMap::new();
    for e in events {
        match e {
            Event::Final {
                partition,
                offset,
                value,
            } => {
                final_at.insert((*partition, *offset), *value);
                if let Some(v) = value.filter(|v| !fence(v)) {
                    r.final_records += 1;
                    final_where.entry(v).or_default().push((*partition, *offset));
                    seen_at.entry((*partition, *offset)).or_default().insert(v);
                    read_where.entry(v).or_default().insert((*partition, *offset));
                } else if value.is_none() {
                    r.corrupted += 1;
                    r.example(
                        &mut shown,
                        "corrupted",
                        format!("final read at {partition}/{offset}"),
                    );
                }
            }
            Event::Acked {
                writer,
                partition,
                offset,
                value,
            } => {
                r.acked += 1;
                must_exist.insert(*value, "acknowledged");
                // librdkafka acknowledges a record whose own response was lost once a later
                // one of the same idempotent producer is (an implicit ack): its offset is
                // unknown (-1001).
                if *offset >= 0 {
                    seen_at.entry((*partition, *offset)).or_default().insert(*value);
                }
                acked_by.entry((*writer, *partition)).or_default().push(*value);
            }
            Event::Unacked { .. } => r.unacked += 1,
            Event::Txn {
                writer,
                records,
                outcome,
            } => match outcome {
                Outcome::Committed => {
                    r.txns_committed += 1;
                    for &(p, v) in records {
                        must_exist.insert(v, "committed");
                        acked_by.entry((*writer, p)).or_default().push(v);
                    }
                }
                Outcome::Aborted => {
                    r.txns_aborted += 1;
                    aborted.extend(records.iter().map(|&(_, v)| v));
                }
                Outcome::Unknown => r.txns_unknown += 1,
            },
            Event::Polled {
                partition,
                offset,
                value,
                consumer,
            } => {
                r.polled += 1;
                match value.filter(|v| !fence(v)) {
                    Some(v) => {
                        must_exist.entry(v).or_insert("polled");
                        seen_at.entry((*partition, *offset)).or_default().insert(v);
                        read_where.entry(v).or_default().insert((*partition, *offset));
                    }
                    None if value.is_none() => {
                        r.corrupted += 1;
                        r.example(
                            &mut shown,
                            "corrupted",
                            format!("consumer {consumer} polled {partition}/{offset}"),
                        );
                    }
                    None => {}
                }
            }
            Event::Assigned { .. } => r.assignments += 1,
            Event::Revoked { .. } | Event::Began { .. } => {}
        }
    }

    let mut lost: Vec<_> = must_exist
        .iter()
        .filter(|(v, _)| !final_where.contains_key(v))
        .collect();
    lost.sort();
    r.lost = lost.len() as u64;
    for (v, why) in lost {
        r.example(
            &mut shown,
            "lost",
            format!("{} ({why}) is not in the log", name(*v)),
        );
    }

    let mut dups: Vec<_> = read_where.iter().filter(|(_, at)| at.len() > 1).collect();
    dups.sort_by_key(|(v, _)| **v);
    for (v, at) in dups {
        r.duplicated += at.len() as u64 - 1;
        let mut at: Vec<_> = at.iter().collect();
        at.sort();
        r.example(&mut shown, "duplicated", format!("{} at {at:?}", name(*v)));
    }

    // An acknowledgement that named an offset the record is not at, while nothing else was
    // seen there (the log was cut and rewritten under it).
    for e in events {
        if let Event::Acked {
            partition,
            offset,
            value,
            ..
        } = e
        {
            let only_here = seen_at
                .get(&(*partition, *offset))
                .is_some_and(|vs| vs.len() == 1);
            if let Some(at) = final_where.get(value) {
                if *offset >= 0 && only_here && !at.contains(&(*partition, *offset)) {
                    r.inconsistent_offsets += 1;
                    r.example(
                        &mut shown,
                        "inconsistent offset",
                        format!(
                            "{} acknowledged at {partition}/{offset}, found at {at:?}",
                            name(*value)
                        ),
                    );
                }
            }
        }
    }

    for (place, values) in &seen_at {
        if values.len() > 1 {
            r.inconsistent_offsets += 1;
            let mut vs: Vec<_> = values.iter().map(|v| name(*v)).collect();
            vs.sort();
            r.example(
                &mut shown,
                "inconsistent offset",
                format!("{}/{} held {}", place.0, place.1, vs.join(" and ")),
            );
        }
    }

    // A producer's records reach each partition in the order it sent them (values grow in
    // send order): each must sit above every earlier one.
    let mut keys: Vec<_> = acked_by.keys().copied().collect();
    keys.sort();
    for key in keys {
        let mut values = acked_by[&key].clone();
        values.sort();
        let mut highest: Option<(i64, Value)> = None;
        for v in values {
            let Some(&(_, offset)) = final_where
                .get(&v)
                .and_then(|at| at.iter().find(|at| at.0 == key.1))
            else {
                continue;
            };
            match highest {
                Some((h, hv)) if offset < h => {
                    r.reordered += 1;
                    r.example(
                        &mut shown,
                        "reordered",
                        format!(
                            "{} at {}/{offset}, below {} sent before it at {h}",
                            name(v),
                            key.1,
                            name(hv)
                        ),
                    );
                }
                _ => highest = Some((offset, v)),
            }
        }
    }

    // Each consumer's polls, in its own order, per assignment of each partition.
    let mut sessions: HashMap<(u32, i32), Option<i64>> = HashMap::new();
    for e in events {
        match e {
            Event::Assigned { consumer, partitions } => {
                for p in partitions {
                    sessions.insert((*consumer, *p), None);
                }
            }
            Event::Revoked { consumer, partitions } => {
                for p in partitions {
                    sessions.remove(&(*consumer, *p));
                }
            }
            Event::Polled {
                consumer,
                partition,
                offset,
                ..
            } => {
                let last = sessions.entry((*consumer, *partition)).or_default();
                if let Some(prev) = *last {
                    if *offset <= prev {
                        r.nonmonotonic_polls += 1;
                        r.example(
                            &mut shown,
                            "non-monotonic poll",
                            format!("consumer {consumer} polled {partition}/{offset} after {prev}"),
                        );
                    } else {
                        let skipped: Vec<i64> = (prev + 1..*offset)
                            .filter(|o| {
                                final_at
                                    .get(&(*partition, *o))
                                    .is_some_and(|v| v.is_some_and(|v| !fence(&v)))
                            })
                            .collect();
                        if !skipped.is_empty() {
                            r.skipped_polls += 1;
                            r.example(
                                &mut shown,
                                "skipped poll",
                                format!(
                                    "consumer {consumer} polled {partition}/{prev} then {offset}, over {skipped:?}"
                                ),
                            );
                        }
                    }
                }
                *last = Some((*offset).max(last.unwrap_or(i64::MIN)));
            }
            _ => {}
        }
    }

    let mut aborted_read: Vec<_> = read_where.keys().filter(|v| aborted.contains(v)).collect();
    aborted_read.sort();
    r.aborted_reads = aborted_read.len() as u64;
    for v in aborted_read {
        r.example(
            &mut shown,
            "aborted read",
            format!("{} of an aborted transaction was read", name(*v)),
        );
    }

    for e in events {
        if let Event::Txn {
            writer,
            records,
            outcome,
        } = e
        {
            if *outcome == Outcome::Aborted {
                continue;
            }
            let visible = records
                .iter()
                .filter(|(_, v)| final_where.contains_key(v))
                .count();
            if visible > 0 && visible < records.len() {
                r.torn_txns += 1;
                r.example(
                    &mut shown,
                    "torn transaction",
                    format!(
                        "writer {writer}'s {outcome:?} transaction of {} records: {visible} visible",
                        records.len()
                    ),
                );
            }
        }
    }
    r.total_anomalies = r.anomalies();
    r
}

fn name(v: Value) -> String {
    format!("{}:{}", writer_of(v), v & ((1 << 40) - 1))
}

#[cfg(test)]
mod tests {
    use super::super::value_of;
    use super::*;

    fn acked(writer: Writer, seq: u64, partition: i32, offset: i64) -> Event {
        Event::Acked {
            writer,
            partition,
            offset,
            value: value_of(writer, seq),
        }
    }
    fn fin(partition: i32, offset: i64, writer: Writer, seq: u64) -> Event {
        Event::Final {
            partition,
            offset,
            value: Some(value_of(writer, seq)),
        }
    }
    fn polled(consumer: u32, partition: i32, offset: i64, writer: Writer, seq: u64) -> Event {
        Event::Polled {
            consumer,
            partition,
            offset,
            value: Some(value_of(writer, seq)),
        }
    }
    fn assigned(consumer: u32, partitions: &[i32]) -> Event {
        Event::Assigned {
            consumer,
            partitions: partitions.to_vec(),
        }
    }
    fn txn(writer: Writer, seqs: &[(i32, u64)], outcome: Outcome) -> Event {
        let records = seqs.iter().map(|&(p, s)| (p, value_of(writer, s))).collect();
        Event::Txn {
            writer,
            records,
            outcome,
        }
    }

    /// Writer 0 acknowledged 0..3 at offsets 0..3 of partition 0, a consumer read them in order,
    /// and the log holds them: nothing to report. Each test below changes one thing.
    fn clean() -> Vec<Event> {
        vec![
            acked(0, 0, 0, 0),
            acked(0, 1, 0, 1),
            acked(0, 2, 0, 2),
            assigned(1, &[0]),
            polled(1, 0, 0, 0, 0),
            polled(1, 0, 1, 0, 1),
            polled(1, 0, 2, 0, 2),
            fin(0, 0, 0, 0),
            fin(0, 1, 0, 1),
            fin(0, 2, 0, 2),
        ]
    }

    fn only(r: &Report) -> Vec<&'static str> {
        let kinds = [
            ("lost", r.lost),
            ("duplicated", r.duplicated),
            ("inconsistent_offsets", r.inconsistent_offsets),
            ("reordered", r.reordered),
            ("nonmonotonic_polls", r.nonmonotonic_polls),
            ("skipped_polls", r.skipped_polls),
            ("aborted_reads", r.aborted_reads),
            ("torn_txns", r.torn_txns),
            ("corrupted", r.corrupted),
        ];
        kinds.iter().filter(|(_, n)| *n > 0).map(|(k, _)| *k).collect()
    }

    #[test]
    fn a_clean_history_has_no_anomaly() {
        let r = check(&clean());
        assert_eq!(r.anomalies(), 0, "{r:?}");
        assert_eq!((r.acked, r.polled, r.final_records, r.assignments), (3, 3, 3, 1));
    }

    #[test]
    fn an_acknowledged_record_missing_from_the_log_is_lost() {
        let mut h = clean();
        h.retain(|e| *e != fin(0, 2, 0, 2) && *e != polled(1, 0, 2, 0, 2));
        let r = check(&h);
        assert_eq!((only(&r), r.lost), (vec!["lost"], 1), "{r:?}");
    }

    #[test]
    fn a_record_a_consumer_read_and_the_log_no_longer_holds_is_lost() {
        let mut h = clean();
        h.push(polled(1, 0, 3, 0, 3)); // never acknowledged, read, then gone
        let r = check(&h);
        assert_eq!((only(&r), r.lost), (vec!["lost"], 1), "{r:?}");
    }

    #[test]
    fn a_record_at_two_offsets_is_duplicated() {
        let mut h = clean();
        h.push(fin(0, 3, 0, 2));
        let r = check(&h);
        assert_eq!((only(&r), r.duplicated), (vec!["duplicated"], 1), "{r:?}");
    }

    #[test]
    fn an_offset_seen_with_two_records_is_inconsistent() {
        let mut h = clean();
        // A consumer read 0:3 at offset 3; after a crash offset 3 holds 0:4 and 0:3 is gone.
        h.push(polled(1, 0, 3, 0, 3));
        h.push(acked(0, 4, 0, 3));
        h.push(fin(0, 3, 0, 4));
        let r = check(&h);
        assert_eq!(
            (only(&r), r.inconsistent_offsets),
            (vec!["lost", "inconsistent_offsets"], 1),
            "{r:?}"
        );
    }

    #[test]
    fn acknowledgements_without_an_offset_name_no_offset() {
        let mut h = clean();
        h.push(acked(0, 3, 0, -1001));
        h.push(acked(1, 3, 0, -1001));
        h.push(fin(0, 3, 0, 3));
        h.push(fin(0, 4, 1, 3));
        let r = check(&h);
        assert_eq!(r.anomalies(), 0, "{r:?}");
    }

    #[test]
    fn a_record_found_elsewhere_than_acknowledged_is_inconsistent() {
        let mut h = clean();
        h.push(acked(0, 3, 0, 3));
        h.push(fin(0, 4, 0, 3));
        let r = check(&h);
        assert_eq!(
            (only(&r), r.inconsistent_offsets),
            (vec!["inconsistent_offsets"], 1),
            "{r:?}"
        );
    }

    #[test]
    fn records_of_one_producer_out_of_send_order_are_reordered() {
        let h = vec![
            acked(0, 0, 0, 1),
            acked(0, 1, 0, 0),
            fin(0, 0, 0, 1),
            fin(0, 1, 0, 0),
        ];
        let r = check(&h);
        // Both acknowledgements named the offsets the log holds: only the order is wrong.
        assert_eq!((only(&r), r.reordered), (vec!["reordered"], 1), "{r:?}");
    }

    #[test]
    fn a_poll_going_back_within_one_assignment_is_non_monotonic() {
        let mut h = clean();
        h.push(polled(1, 0, 1, 0, 1));
        let r = check(&h);
        // The record itself is where it always was: only the poll went back.
        assert_eq!(
            (only(&r), r.nonmonotonic_polls),
            (vec!["nonmonotonic_polls"], 1),
            "{r:?}"
        );
        // A new assignment may start again from an older offset.
        let mut h = clean();
        h.push(assigned(1, &[0]));
        h.push(polled(1, 0, 1, 0, 1));
        assert_eq!(check(&h).anomalies(), 0);
    }

    #[test]
    fn a_poll_stepping_over_a_visible_record_skips() {
        let mut h = clean();
        h.retain(|e| *e != polled(1, 0, 1, 0, 1));
        let r = check(&h);
        assert_eq!((only(&r), r.skipped_polls), (vec!["skipped_polls"], 1), "{r:?}");
        // Stepping over offsets that hold nothing visible (markers, aborted records) is not.
        let mut h = vec![
            acked(0, 0, 0, 0),
            acked(0, 1, 0, 5),
            fin(0, 0, 0, 0),
            fin(0, 5, 0, 1),
        ];
        h.extend([assigned(1, &[0]), polled(1, 0, 0, 0, 0), polled(1, 0, 5, 0, 1)]);
        assert_eq!(check(&h).anomalies(), 0);
    }

    #[test]
    fn a_record_of_an_aborted_transaction_read_is_an_aborted_read() {
        let mut h = clean();
        h.push(txn(2, &[(1, 0), (1, 1)], Outcome::Aborted));
        h.push(assigned(1, &[1]));
        h.push(polled(1, 1, 0, 2, 0));
        let r = check(&h);
        // The consumer read it and the log no longer shows it: lost too, as Jepsen counts.
        assert_eq!((r.aborted_reads, r.torn_txns), (1, 0), "{r:?}");
        let mut h = clean();
        h.push(txn(2, &[(1, 0), (1, 1)], Outcome::Aborted));
        h.push(fin(1, 0, 2, 0));
        h.push(fin(1, 1, 2, 1));
        let r = check(&h);
        assert_eq!((only(&r), r.aborted_reads), (vec!["aborted_reads"], 2), "{r:?}");
    }

    #[test]
    fn a_transaction_partly_visible_is_torn() {
        let mut h = clean();
        h.push(txn(2, &[(1, 0), (2, 1)], Outcome::Unknown));
        h.push(fin(1, 0, 2, 0));
        let r = check(&h);
        assert_eq!((only(&r), r.torn_txns), (vec!["torn_txns"], 1), "{r:?}");
        // All of an unknown one, or none of it, is fine.
        let mut h = clean();
        h.push(txn(2, &[(1, 0), (2, 1)], Outcome::Unknown));
        assert_eq!(check(&h).anomalies(), 0);
        h.push(fin(1, 0, 2, 0));
        h.push(fin(2, 0, 2, 1));
        assert_eq!(check(&h).anomalies(), 0);
        // A committed one partly visible is torn and its missing record lost.
        let mut h = clean();
        h.push(txn(2, &[(1, 0), (2, 1)], Outcome::Committed));
        h.push(fin(1, 0, 2, 0));
        let r = check(&h);
        assert_eq!(
            (only(&r), r.torn_txns, r.lost),
            (vec!["lost", "torn_txns"], 1, 1),
            "{r:?}"
        );
    }

    #[test]
    fn a_damaged_record_is_corrupted() {
        let mut h = clean();
        h.push(Event::Final {
            partition: 0,
            offset: 3,
            value: None,
        });
        let r = check(&h);
        assert_eq!((only(&r), r.corrupted), (vec!["corrupted"], 1), "{r:?}");
    }

    #[test]
    fn fence_records_are_not_counted() {
        let mut h = clean();
        h.push(Event::Final {
            partition: 0,
            offset: 3,
            value: Some(value_of(FENCE_WRITER, 0)),
        });
        let r = check(&h);
        assert_eq!((r.anomalies(), r.final_records), (0, 3), "{r:?}");
    }
}

//! The spend journal on disk: an append-only file of checksummed records in the data dir.
//! A record says "under lease `epoch` of `pool` this node lets through at most `ceiling`
//! tokens of reservations" (written and synced *before* the hot path may go past the previous
//! ceiling), or that such an epoch needs no report any more. Reading stops at the first torn
//! or corrupt record (a crash mid-append); what was synced before it is intact. The file is
//! rewritten with only the open epochs at start and whenever it grows past a bound.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::codec::{decode, encode};
use crate::command::PoolId;

pub const JOURNAL_FILE: &str = "spend-journal";
/// Past this size the file is rewritten with the open epochs only.
const COMPACT_AFTER_BYTES: u64 = 1 << 20;
/// A record larger than this is corruption, not a record.
const MAX_RECORD_BYTES: usize = 64 * 1024;
const HEADER_BYTES: usize = 12;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    Ceiling {
        pool: PoolId,
        epoch: u64,
        ceiling: u64,
    },
    Closed {
        pool: PoolId,
        epoch: u64,
    },
}

/// The open epochs: `(pool, epoch) → ceiling`.
pub type Ceilings = BTreeMap<(PoolId, u64), u64>;

fn fold(ceilings: &mut Ceilings, record: Record) {
    match record {
        Record::Ceiling {
            pool,
            epoch,
            ceiling,
        } => {
            let entry = ceilings.entry((pool, epoch)).or_default();
            *entry = (*entry).max(ceiling);
        }
        Record::Closed { pool, epoch } => {
            ceilings.remove(&(pool, epoch));
        }
    }
}

/// FNV-1a: enough to tell a torn or zero-filled tail from a record.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn frame(record: &Record, out: &mut Vec<u8>) -> std::io::Result<()> {
    let payload = encode(record).map_err(std::io::Error::other)?;
    let len = u32::try_from(payload.len()).map_err(std::io::Error::other)?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

/// Every intact record of `bytes`, in order, up to the first torn or corrupt one.
fn parse(bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut rest = bytes;
    while rest.len() >= HEADER_BYTES {
        let (len, sum) = rest.split_at(4);
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let mut sum_bytes = [0u8; 8];
        sum_bytes.copy_from_slice(&sum[..8]);
        let body = &rest[HEADER_BYTES..];
        if len == 0 || len > MAX_RECORD_BYTES || body.len() < len {
            break;
        }
        let payload = &body[..len];
        if checksum(payload) != u64::from_le_bytes(sum_bytes) {
            break;
        }
        match decode::<Record>(payload) {
            Ok(record) => records.push(record),
            Err(_) => break,
        }
        rest = &body[len..];
    }
    records
}

pub struct JournalFile {
    dir: PathBuf,
    file: File,
    len: u64,
    open: Ceilings,
}

impl JournalFile {
    /// Reads what a previous process left (its open epochs) and starts a compacted file
    /// holding exactly those.
    pub fn open(dir: &Path) -> std::io::Result<(Self, Ceilings)> {
        let path = dir.join(JOURNAL_FILE);
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut open = Ceilings::new();
        for record in parse(&bytes) {
            fold(&mut open, record);
        }
        let file = write_compacted(dir, &open)?;
        let len = file.metadata()?.len();
        let recovered = open.clone();
        Ok((
            Self {
                dir: dir.to_path_buf(),
                file,
                len,
                open,
            },
            recovered,
        ))
    }

    /// Appends and syncs; nothing in `records` counts before this returns.
    pub fn append(&mut self, records: &[Record]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for record in records {
            frame(record, &mut bytes)?;
            fold(&mut self.open, record.clone());
        }
        if self.len + bytes.len() as u64 > COMPACT_AFTER_BYTES {
            self.file = write_compacted(&self.dir, &self.open)?;
            self.len = self.file.metadata()?.len();
            return Ok(());
        }
        self.file.write_all(&bytes)?;
        self.file.sync_data()?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    pub fn open_epochs(&self) -> &Ceilings {
        &self.open
    }
}

/// Writes the open epochs to a new file, syncs it and renames it over the journal (then syncs
/// the directory, so the rename survives a crash too).
fn write_compacted(dir: &Path, open: &Ceilings) -> std::io::Result<File> {
    let mut bytes = Vec::new();
    for ((pool, epoch), ceiling) in open {
        let record = Record::Ceiling {
            pool: pool.clone(),
            epoch: *epoch,
            ceiling: *ceiling,
        };
        frame(&record, &mut bytes)?;
    }
    let fresh = dir.join(format!("{JOURNAL_FILE}.new"));
    let mut file = File::create(&fresh)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&fresh, dir.join(JOURNAL_FILE))?;
    File::open(dir)?.sync_all()?;
    OpenOptions::new().append(true).open(dir.join(JOURNAL_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::QuotaScope;

    fn pool(name: &str) -> PoolId {
        PoolId::Budget(QuotaScope::caller(name))
    }

    #[test]
    fn ceilings_survive_reopening_closed_epochs_do_not_and_a_torn_tail_is_ignored() {
        let dir = tempfile::TempDir::new().unwrap();
        let (mut journal, recovered) = JournalFile::open(dir.path()).unwrap();
        assert!(recovered.is_empty());
        journal
            .append(&[
                Record::Ceiling {
                    pool: pool("a"),
                    epoch: 3,
                    ceiling: 100,
                },
                Record::Ceiling {
                    pool: pool("b"),
                    epoch: 1,
                    ceiling: 50,
                },
            ])
            .unwrap();
        journal
            .append(&[
                Record::Ceiling {
                    pool: pool("a"),
                    epoch: 3,
                    ceiling: 250,
                },
                Record::Closed {
                    pool: pool("b"),
                    epoch: 1,
                },
            ])
            .unwrap();
        drop(journal);
        // A crash mid-append leaves part of a record behind.
        let path = dir.path().join(JOURNAL_FILE);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&[40, 0, 0, 0, 1, 2, 3]).unwrap();
        drop(file);
        let (journal, recovered) = JournalFile::open(dir.path()).unwrap();
        assert_eq!(
            recovered.into_iter().collect::<Vec<_>>(),
            vec![((pool("a"), 3), 250)]
        );
        assert_eq!(journal.open_epochs().len(), 1);
        // The reopened file was compacted: the torn bytes are gone.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(parse(&bytes).len(), 1);
    }

    #[test]
    fn a_flipped_byte_ends_the_readable_part() {
        let mut bytes = Vec::new();
        for epoch in 1..=3 {
            frame(
                &Record::Ceiling {
                    pool: pool("a"),
                    epoch,
                    ceiling: 10,
                },
                &mut bytes,
            )
            .unwrap();
        }
        let one = bytes.len() / 3;
        bytes[one + HEADER_BYTES + 1] ^= 0xff;
        assert_eq!(parse(&bytes).len(), 1);
    }

    #[test]
    fn the_file_is_rewritten_with_the_open_epochs_when_it_grows() {
        let dir = tempfile::TempDir::new().unwrap();
        let (mut journal, _) = JournalFile::open(dir.path()).unwrap();
        // Batches of 1,000 records: about 50,000 in all, past the bound twice.
        for batch in 0..50u64 {
            let records: Vec<Record> = (0..1_000u64)
                .map(|i| Record::Ceiling {
                    pool: pool("a"),
                    epoch: 1,
                    ceiling: batch * 1_000 + i,
                })
                .collect();
            journal.append(&records).unwrap();
        }
        let size = std::fs::metadata(dir.path().join(JOURNAL_FILE))
            .unwrap()
            .len();
        assert!(size <= COMPACT_AFTER_BYTES, "{size}");
        drop(journal);
        let (_, recovered) = JournalFile::open(dir.path()).unwrap();
        assert_eq!(recovered.get(&(pool("a"), 1)), Some(&49_999));
    }
}

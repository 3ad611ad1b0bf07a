//! What a cluster node tells the others about its identity, and its wire format.
//!
//! The format is built to outlive this release: a four-byte magic, a format version, then
//! fields as `tag, length, value` records. A reader skips the records it does not know and
//! the bytes after them, so a later release can add a field (a new tag) without its
//! announcements being ignored by this one during a rolling upgrade. A field this release
//! needs (identity, layout) missing makes the whole message unreadable: it is ignored, never
//! half-read.

use crate::{Config, Identity, Layout};

/// The first bytes of every announcement.
const MAGIC: &[u8; 4] = b"IDGA";

/// The format's version. A reader accepts every version from this one on: a later version
/// may add records, never change the meaning of these.
const FORMAT: u8 = 1;

/// The longest module version text an announcement carries.
const MAX_VERSION_LEN: usize = 32;

/// Bytes in a cluster node id.
pub const NODE_ID_LEN: usize = 40;

/// The most refused nodes one announcement names (the rest are found by the nodes' own
/// comparison): bounds a message at about 1.7 KB whatever the deployment does.
pub const MAX_NAMED_REFUSALS: usize = 32;

/// Record tags. A new field gets a new tag; a tag's meaning never changes.
mod tag {
    /// `since` (u64), then `refusing` (u8).
    pub const RANK: u8 = 1;
    /// step, offset (u64 each).
    pub const IDENTITY: u8 = 2;
    /// epoch, time unit (u64 each), time, shard and sequence bits (u8 each).
    pub const LAYOUT: u8 = 3;
    /// The module version, UTF-8.
    pub const VERSION: u8 = 4;
    /// Nodes the sender holds must refuse to issue: each a node id (40 bytes) and the
    /// `since` (u64) of the announcement of that node the verdict was drawn on.
    pub const REFUSED: u8 = 5;
    /// Shard values reserved for leased worker ids (u64; absent: 0).
    pub const LEASE_WORKERS: u8 = 6;
    /// Never a field of this release: what [`super::Announcement::encode_as_later_release`]
    /// sends in place of a field a later release adds.
    pub const LATER_RELEASE: u8 = 0xF0;
}

/// The value of the stand-in for a later release's field.
const LATER_RELEASE_FIELD: &[u8] = b"a field of a later release, 0.5 or after";

/// One node's identity as it announces it, with its verdicts on others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// Since when, in unix ms, the node issues in its current state: when its module loaded,
    /// or when it was promoted, or when a refusal of its own ended. Earlier wins a conflict.
    pub since_unix_ms: u64,
    /// Whether the node holds itself refused (by its own comparison or a peer's verdict): a
    /// refusing node ranks after every node that issues, so that restarting a node that was
    /// right never hands its residue class to the node that refuses.
    pub refusing: bool,
    /// Its step and offset.
    pub identity: Identity,
    /// Its snowflake layout.
    pub layout: Layout,
    /// Its module version (shown, never compared: mixed versions are a rolling upgrade).
    pub version: String,
    /// Shard values it reserves for leased worker ids (`lease-workers`; 0: leases off). Part
    /// of the settings every node must share: a node that reserves fewer would hand out, as
    /// `SNOWFLAKE.NEXT` shards, values another node leases as worker ids.
    pub lease_workers: u64,
    /// Nodes that the sender's comparison says must refuse to issue (at most
    /// [`MAX_NAMED_REFUSALS`]): a verdict reaches the node it names through any node that
    /// hears both sides, even when the two cannot hear each other.
    pub refused: Vec<Refused>,
}

/// A verdict an announcement carries: node `id` must refuse, as judged on its announcement
/// of `since_unix_ms`. A node heeds only verdicts on its current announcement, so a verdict
/// on what it was before a restart (or before its refusal ended) never outlives that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The node's id.
    pub id: String,
    /// The `since` of the node's announcement the verdict was drawn on.
    pub since_unix_ms: u64,
}

/// Bytes of one [`Refused`] on the wire.
const REFUSED_LEN: usize = NODE_ID_LEN + 8;

impl Announcement {
    /// This node's announcement: its configuration, since when it issues, nothing refused.
    pub fn of(config: &Config, since_unix_ms: u64) -> Self {
        Announcement {
            since_unix_ms,
            refusing: false,
            identity: config.identity,
            layout: config.layout,
            version: String::new(),
            lease_workers: 0,
            refused: Vec::new(),
        }
    }

    /// The announcement with its `lease-workers`.
    pub fn with_lease_workers(mut self, lease_workers: u64) -> Self {
        self.lease_workers = lease_workers;
        self
    }

    /// The announcement with its module version.
    pub fn with_version(mut self, version: &str) -> Self {
        self.version = version.chars().take(MAX_VERSION_LEN).collect();
        self
    }

    /// Where the node stands in the start order: refusing nodes after all others.
    pub fn rank(&self) -> u64 {
        if self.refusing {
            u64::MAX
        } else {
            self.since_unix_ms
        }
    }

    /// The bytes sent over the bus.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(128 + self.refused.len() * REFUSED_LEN);
        bytes.extend_from_slice(MAGIC);
        bytes.push(FORMAT);
        let mut rank = self.since_unix_ms.to_le_bytes().to_vec();
        rank.push(u8::from(self.refusing));
        record(&mut bytes, tag::RANK, &rank);
        let identity: Vec<u8> = [self.identity.step, self.identity.offset]
            .iter()
            .flat_map(|n| n.to_le_bytes())
            .collect();
        record(&mut bytes, tag::IDENTITY, &identity);
        let layout = &self.layout;
        let mut fields: Vec<u8> = [layout.epoch_unix_ms, layout.time_unit_ms]
            .iter()
            .flat_map(|n| n.to_le_bytes())
            .collect();
        for bits in [layout.time_bits, layout.shard_bits, layout.sequence_bits] {
            fields.push(bits as u8);
        }
        record(&mut bytes, tag::LAYOUT, &fields);
        let version = &self.version.as_bytes()[..self.version.len().min(MAX_VERSION_LEN)];
        record(&mut bytes, tag::VERSION, version);
        let refused: Vec<u8> = self
            .refused
            .iter()
            .filter(|refused| refused.id.len() == NODE_ID_LEN)
            .take(MAX_NAMED_REFUSALS)
            .flat_map(|refused| {
                let since = refused.since_unix_ms.to_le_bytes();
                refused.id.bytes().chain(since)
            })
            .collect();
        record(&mut bytes, tag::REFUSED, &refused);
        record(
            &mut bytes,
            tag::LEASE_WORKERS,
            &self.lease_workers.to_le_bytes(),
        );
        bytes
    }

    /// The bytes a later release could send for this announcement: a higher format version
    /// and, after this release's records, one of a tag this release does not know. Sent
    /// instead of [`Announcement::encode`]'s only under the hidden test setting
    /// `idgen.debug-announce-future-record yes`, so that a real cluster shows nodes of this
    /// release reading a later release's announcements (docs/identity.md, "The format
    /// lasts").
    pub fn encode_as_later_release(&self) -> Vec<u8> {
        let mut bytes = self.encode();
        bytes[MAGIC.len()] = FORMAT + 1;
        record(&mut bytes, tag::LATER_RELEASE, LATER_RELEASE_FIELD);
        bytes
    }

    /// Reads an announcement; `None` for anything that is not one (another magic, an older
    /// format, a record cut short, a required field missing or malformed). Records of
    /// unknown tags are skipped.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let (&format, mut rest) = rest.split_first()?;
        if format < FORMAT {
            return None;
        }
        let (mut rank, mut identity, mut layout) = (None, None, None);
        let (mut version, mut refused, mut lease_workers) = (String::new(), Vec::new(), 0);
        while !rest.is_empty() {
            let (&tag, after) = rest.split_first()?;
            let len = usize::from(u16::from_le_bytes(after.get(..2)?.try_into().ok()?));
            let value = after.get(2..2 + len)?;
            rest = &after[2 + len..];
            match tag {
                tag::RANK => rank = Some((u64_at(value, 0)?, *value.get(8)? != 0)),
                tag::IDENTITY => {
                    identity = Some(Identity {
                        step: u64_at(value, 0)?,
                        offset: u64_at(value, 1)?,
                    })
                }
                tag::LAYOUT => {
                    let width = |index: usize| {
                        value
                            .get(16 + index)
                            .map(|&bits| u32::from(bits))
                            .filter(|&bits| bits <= 63)
                    };
                    layout = Some(Layout {
                        epoch_unix_ms: u64_at(value, 0)?,
                        time_unit_ms: u64_at(value, 1)?,
                        time_bits: width(0)?,
                        shard_bits: width(1)?,
                        sequence_bits: width(2)?,
                    })
                }
                tag::VERSION => {
                    let text = &value[..value.len().min(MAX_VERSION_LEN)];
                    version = String::from_utf8_lossy(text).into_owned();
                }
                tag::REFUSED => {
                    refused = value
                        .chunks_exact(REFUSED_LEN)
                        .take(MAX_NAMED_REFUSALS)
                        .map(|chunk| Refused {
                            id: String::from_utf8_lossy(&chunk[..NODE_ID_LEN]).into_owned(),
                            since_unix_ms: u64_at(&chunk[NODE_ID_LEN..], 0).unwrap_or(0),
                        })
                        .collect()
                }
                tag::LEASE_WORKERS => lease_workers = u64_at(value, 0)?,
                _ => {} // a later release's field
            }
        }
        let (since_unix_ms, refusing) = rank?;
        Some(Announcement {
            since_unix_ms,
            refusing,
            identity: identity?,
            layout: layout?,
            version,
            lease_workers,
            refused,
        })
    }

    /// The layout in words, for a conflict's description.
    pub(crate) fn layout_text(&self) -> String {
        let layout = &self.layout;
        format!(
            "{}|{}|{} bits from epoch {} ms in units of {} ms",
            layout.time_bits,
            layout.shard_bits,
            layout.sequence_bits,
            layout.epoch_unix_ms,
            layout.time_unit_ms
        )
    }
}

/// Appends one `tag, length, value` record (values are far below 64 KiB by construction).
fn record(bytes: &mut Vec<u8>, tag: u8, value: &[u8]) {
    let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
    bytes.push(tag);
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(&value[..usize::from(len)]);
}

/// The `index`-th little-endian u64 of `value`.
fn u64_at(value: &[u8], index: usize) -> Option<u64> {
    let chunk = value.get(index * 8..index * 8 + 8)?;
    Some(u64::from_le_bytes(chunk.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Announcement {
        let config = Config {
            identity: Identity { step: 8, offset: 3 },
            ..Config::default()
        };
        let mut announcement = Announcement::of(&config, 17)
            .with_version("0.3.0")
            .with_lease_workers(16);
        announcement.refused = ["a", "b"]
            .iter()
            .map(|id| Refused {
                id: id.repeat(NODE_ID_LEN),
                since_unix_ms: 5,
            })
            .collect();
        announcement
    }

    #[test]
    fn an_announcement_reads_back_as_sent() {
        let sent = sample();
        assert_eq!(Announcement::decode(&sent.encode()), Some(sent.clone()));
        let mut refusing = sent;
        refusing.refusing = true;
        assert_eq!(Announcement::decode(&refusing.encode()), Some(refusing));
    }

    #[test]
    fn a_message_cut_short_or_of_another_kind_is_ignored() {
        let bytes = sample().encode();
        // Every cut inside a record, or before the required ones, is unreadable; a cut that
        // drops only whole optional records still reads.
        for cut in 0..bytes.len() {
            if let Some(read) = Announcement::decode(&bytes[..cut]) {
                assert_eq!(read.identity, sample().identity, "cut at {cut}");
            }
        }
        assert_eq!(Announcement::decode(&bytes[..20]), None);
        let mut other_magic = bytes.clone();
        other_magic[0] = b'X';
        assert_eq!(Announcement::decode(&other_magic), None);
        let mut older = bytes;
        older[4] = 0;
        assert_eq!(Announcement::decode(&older), None);
    }

    #[test]
    fn a_later_releases_fields_are_skipped() {
        // What a next release may send: a higher format version, a new record between known
        // ones, and longer known records (a new trailing field inside each).
        let sent = sample();
        let mut bytes = sent.encode();
        bytes[4] = FORMAT + 1;
        let mut future = bytes[..5].to_vec();
        record(&mut future, 200, b"a field this release does not know");
        // Every fixed-width record with bytes of a later release after its value (the
        // version is text: the whole value).
        let mut rest = &bytes[5..];
        while let Some((&tag, after)) = rest.split_first() {
            let len = usize::from(u16::from_le_bytes([after[0], after[1]]));
            let mut longer = after[2..2 + len].to_vec();
            if tag != tag::VERSION {
                longer.extend_from_slice(&[0xEE; 7]);
            }
            record(&mut future, tag, &longer);
            rest = &after[2 + len..];
        }
        record(&mut future, 9, &[1, 2, 3]);
        assert_eq!(Announcement::decode(&future), Some(sent));
    }

    #[test]
    fn what_the_later_release_setting_sends_reads_as_this_release_sends_it() {
        let sent = sample();
        let later = sent.encode_as_later_release();
        let now = sent.encode();
        assert_eq!(later[4], FORMAT + 1);
        assert_eq!(later[5..now.len()], now[5..]);
        assert_eq!(later.len(), now.len() + 3 + LATER_RELEASE_FIELD.len());
        assert_eq!(Announcement::decode(&later), Some(sent));
    }

    #[test]
    fn refusing_nodes_rank_after_every_issuing_node() {
        let mut announcement = sample();
        assert_eq!(announcement.rank(), 17);
        announcement.refusing = true;
        assert_eq!(announcement.rank(), u64::MAX);
    }

    #[test]
    fn a_message_names_at_most_the_cap_of_refused_nodes() {
        let mut announcement = sample();
        announcement.refused = (0..100)
            .map(|i| Refused {
                id: format!("{i:040}"),
                since_unix_ms: i,
            })
            .collect();
        let bytes = announcement.encode();
        assert!(bytes.len() < 1_800, "{} bytes", bytes.len());
        let read = Announcement::decode(&bytes).unwrap();
        assert_eq!(read.refused.len(), MAX_NAMED_REFUSALS);
    }
}

//! `NodeBytes`: a serialised tree node, stored inline when it is small.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use smallvec::SmallVec;
use std::fmt;

/// Nodes up to this many bytes are stored without a heap allocation (a UTS node is 20 bytes).
pub const INLINE_NODE_BYTES: usize = 24;

/// A tree node serialised by the worker side (postcard). Opaque to the master.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct NodeBytes(SmallVec<[u8; INLINE_NODE_BYTES]>);

impl NodeBytes {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_slice(bytes: &[u8]) -> Self {
        Self(SmallVec::from_slice(bytes))
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Heap bytes owned beyond the inline buffer (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        if self.0.spilled() { self.0.capacity() } else { 0 }
    }
}

/// Lets a serialiser (`postcard::to_extend`) write straight into the node.
impl Extend<u8> for NodeBytes {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

impl fmt::Debug for NodeBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeBytes(")?;
        for b in self.0.iter() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl Serialize for NodeBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for NodeBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = NodeBytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("node bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<NodeBytes, E> {
                Ok(NodeBytes::from_slice(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeBytes, A::Error> {
                let mut out = NodeBytes::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.0.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_bytes(BytesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_bytes_round_trip_through_postcard_inline_and_spilled() {
        for len in [0usize, 1, 20, INLINE_NODE_BYTES, INLINE_NODE_BYTES + 1, 1000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let node = NodeBytes::from_slice(&bytes);
            let encoded = postcard::to_allocvec(&node).unwrap();
            let decoded: NodeBytes = postcard::from_bytes(&encoded).unwrap();
            assert_eq!(decoded.as_slice(), &bytes[..]);
            assert_eq!(decoded.heap_bytes() > 0, len > INLINE_NODE_BYTES);
        }
    }
}

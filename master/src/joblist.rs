//! The job list L: nodes waiting to be searched.

use bts_protocol::{NodeBytes, Returned};
use std::collections::VecDeque;

/// Which job the master hands out next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Order {
    /// Most recently returned first: L behaves like a depth-first stack and stays small.
    #[default]
    Lifo,
    /// Oldest first: breadth-first flavour, L grows larger.
    Fifo,
}

/// A node waiting in L.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    pub depth: u32,
    pub node: NodeBytes,
}

impl From<Returned> for Pending {
    fn from(r: Returned) -> Self {
        Pending { depth: r.depth, node: r.node }
    }
}

impl From<Pending> for Returned {
    fn from(p: Pending) -> Self {
        Returned { depth: p.depth, node: p.node }
    }
}

/// `nodes` dealt out in turn into `parts` parts: node i goes to part i mod `parts` (no parts, and
/// nothing dealt, when `parts` is 0).
pub fn deal<T>(nodes: impl IntoIterator<Item = T>, parts: usize) -> Vec<Vec<T>> {
    let mut dealt: Vec<Vec<T>> = (0..parts).map(|_| Vec::new()).collect();
    if parts > 0 {
        for (i, n) in nodes.into_iter().enumerate() {
            dealt[i % parts].push(n);
        }
    }
    dealt
}

/// The job list. Nodes arrive in the order a sequential depth-first search would visit them; with
/// [`Order::Lifo`] they are stacked so that the first of them is handed out first.
#[derive(Debug, Default)]
pub struct JobList {
    order: Order,
    items: VecDeque<Pending>,
    heap_bytes: usize,
}

impl JobList {
    pub fn new(order: Order) -> Self {
        Self { order, items: VecDeque::new(), heap_bytes: 0 }
    }

    pub fn order(&self) -> Order {
        self.order
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds nodes given in depth-first order.
    pub fn extend_dfs<I>(&mut self, nodes: I)
    where
        I: IntoIterator<Item = Pending>,
        I::IntoIter: DoubleEndedIterator,
    {
        match self.order {
            Order::Lifo => nodes.into_iter().rev().for_each(|p| self.push(p)),
            Order::Fifo => nodes.into_iter().for_each(|p| self.push(p)),
        }
    }

    /// Puts back a job that was out with a worker, to be handed out again soon.
    pub fn put_back(&mut self, pending: Pending) {
        self.heap_bytes += pending.node.heap_bytes();
        match self.order {
            Order::Lifo => self.items.push_back(pending),
            Order::Fifo => self.items.push_front(pending),
        }
    }

    fn push(&mut self, pending: Pending) {
        self.heap_bytes += pending.node.heap_bytes();
        self.items.push_back(pending);
    }

    pub fn pop(&mut self) -> Option<Pending> {
        let item = match self.order {
            Order::Lifo => self.items.pop_back(),
            Order::Fifo => self.items.pop_front(),
        }?;
        self.heap_bytes -= item.node.heap_bytes();
        Some(item)
    }

    /// The `i`-th waiting node (in the order of [`iter`](Self::iter)).
    pub fn get(&self, i: usize) -> Option<&Pending> {
        self.items.get(i)
    }

    /// The waiting nodes, next to be handed out last.
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.items.iter()
    }

    /// Memory held by the list: its slots (allocated capacity included) and spilled node bytes.
    pub fn memory_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<Pending>() + self.heap_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(depth: u32) -> Pending {
        Pending { depth, node: NodeBytes::from_slice(&[depth as u8]) }
    }

    #[test]
    fn lifo_hands_out_the_first_of_the_last_batch_first() {
        let mut list = JobList::new(Order::Lifo);
        list.extend_dfs([p(1), p(2)]);
        list.extend_dfs([p(3), p(4)]);
        let order: Vec<u32> = std::iter::from_fn(|| list.pop()).map(|p| p.depth).collect();
        assert_eq!(order, vec![3, 4, 1, 2]);
    }

    #[test]
    fn fifo_hands_out_in_arrival_order_and_put_back_jumps_the_queue() {
        let mut list = JobList::new(Order::Fifo);
        list.extend_dfs([p(1), p(2)]);
        list.put_back(p(9));
        let order: Vec<u32> = std::iter::from_fn(|| list.pop()).map(|p| p.depth).collect();
        assert_eq!(order, vec![9, 1, 2]);
    }

    #[test]
    fn memory_counts_spilled_nodes() {
        let mut list = JobList::new(Order::Lifo);
        list.extend_dfs([Pending { depth: 0, node: NodeBytes::from_slice(&[7; 100]) }]);
        assert!(list.memory_bytes() >= 100);
        list.pop();
        assert_eq!(list.memory_bytes(), list.items.capacity() * std::mem::size_of::<Pending>());
    }
}

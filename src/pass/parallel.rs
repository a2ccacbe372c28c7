//! The pass's network phases run their requests on a few threads at once (`--concurrency`),
//! each worker taking the next item; results come back in input order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use crate::qwenpaw::Server;

/// Tells `server` a lane ended when dropped: after its last item, or while a panic
/// unwinds it (a server that orders its lanes must not wait for it then).
struct LaneEnd<'a>(&'a dyn Server, usize);

impl Drop for LaneEnd<'_> {
    fn drop(&mut self) {
        self.0.lane_ended(self.1);
    }
}

/// Runs `work` over `items` on at most `workers` threads (as many as `server` says:
/// [`Server::lanes`]); results in input order.
pub(super) fn parallel<T: Sync, R: Send>(
    server: &dyn Server,
    items: &[T],
    workers: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    let lanes = server.lanes(workers, items.len());
    if lanes <= 1 || items.len() == 1 {
        // One worker: no thread to start.
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let (next, work) = (&next, &work);
    let done: Vec<Vec<(usize, R)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..lanes.min(items.len()))
            .map(|lane| {
                scope.spawn(move || {
                    // Each worker its own connections: no pool shared between threads.
                    crate::qwenpaw::client::enter_lane(lane);
                    // Its end is said even if its start unwinds.
                    let _end = LaneEnd(server, lane);
                    server.lane_started(lane);
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, work(item)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    for (i, result) in done.into_iter().flatten() {
        results[i] = Some(result);
    }
    results
        .into_iter()
        .map(|r| r.expect("every item was processed"))
        .collect()
}

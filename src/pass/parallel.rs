//! The pass's network phases run their requests on a few threads at once (`--concurrency`),
//! each worker taking the next item; results come back in input order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

/// Runs `work` over `items` on at most `workers` threads; results in input order.
pub(super) fn parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    if workers <= 1 || items.len() == 1 {
        // One worker: no thread to start (and, in the simulation, one deterministic order).
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let (next, work) = (&next, &work);
    let done: Vec<Vec<(usize, R)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..workers.clamp(1, items.len()))
            .map(|lane| {
                scope.spawn(move || {
                    // Each worker its own connections: no pool shared between threads.
                    crate::qwenpaw::client::enter_lane(lane);
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

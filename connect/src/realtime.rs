//! Real-time sleeps for the bounds: a network does not pause when a test pauses tokio's clock.
//!
//! Under `#[tokio::test(start_paused = true)]` tokio moves its clock forward whenever the
//! runtime has nothing to do, which is exactly while it waits for a server's answer: a deadline
//! on tokio's clock would fire at once on a request to a server in another process. The bounds
//! of this crate therefore sleep on the monotonic clock of the operating system, on one timer
//! thread for the whole process ([`RealSleep`]), and hyper's own timers (HTTP/2 PINGs, the
//! idle pool) use the same ([`RealTimer`]).
//!
//! The thread keeps the pending deadlines in a heap and wakes each sleep's task when its
//! deadline passes; a sleep dropped before it fires is forgotten.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The pending deadlines.
#[derive(Default)]
struct Wheel {
    /// `(deadline, id)`, earliest first; an id no longer in `wakers` is skipped.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: HashMap<u64, Waker>,
}

struct Shared {
    wheel: Mutex<Wheel>,
    changed: Condvar,
    next_id: AtomicU64,
}

/// The timer thread, started on first use. `None` if the thread could not be started: the
/// sleeps then fall back to tokio's clock.
fn shared() -> Option<&'static Arc<Shared>> {
    static SHARED: OnceLock<Option<Arc<Shared>>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let shared = Arc::new(Shared {
                wheel: Mutex::new(Wheel::default()),
                changed: Condvar::new(),
                next_id: AtomicU64::new(1),
            });
            let worker = shared.clone();
            std::thread::Builder::new()
                .name("kcr-connect-timer".into())
                .spawn(move || run(&worker))
                .map(|_| shared)
                .map_err(|e| tracing::error!(error = %e, "kcr-connect: no timer thread; bounds use tokio's clock"))
                .ok()
        })
        .as_ref()
}

fn run(shared: &Shared) {
    let mut wheel = shared.wheel.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        while let Some(Reverse((deadline, id))) = wheel.heap.peek().copied() {
            if !wheel.wakers.contains_key(&id) {
                wheel.heap.pop();
                continue;
            }
            if deadline > now {
                break;
            }
            wheel.heap.pop();
            if let Some(waker) = wheel.wakers.remove(&id) {
                waker.wake();
            }
        }
        let next = wheel.heap.peek().map(|Reverse((deadline, _))| *deadline);
        wheel = match next {
            Some(deadline) => {
                let wait = deadline.saturating_duration_since(Instant::now());
                shared
                    .changed
                    .wait_timeout(wheel, wait)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|e| e.into_inner().0)
            }
            None => shared
                .changed
                .wait(wheel)
                .unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// A sleep until a deadline on the system's monotonic clock.
pub struct RealSleep {
    deadline: Instant,
    /// Its entry in the timer's heap, once polled.
    id: Option<u64>,
    /// Where the timer thread is missing: tokio's sleep.
    fallback: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl std::fmt::Debug for RealSleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealSleep")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl RealSleep {
    /// A sleep of `duration` from now.
    pub fn new(duration: Duration) -> Self {
        Self::until(Instant::now() + duration)
    }

    /// A sleep until `deadline`.
    pub fn until(deadline: Instant) -> Self {
        RealSleep {
            deadline,
            id: None,
            fallback: None,
        }
    }

    /// Its deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (it may fire again).
    pub fn reset(&mut self, deadline: Instant) {
        self.forget();
        self.deadline = deadline;
        self.fallback = None;
    }

    fn forget(&mut self) {
        if let (Some(id), Some(shared)) = (self.id.take(), shared()) {
            let mut wheel = shared.wheel.lock().unwrap_or_else(|e| e.into_inner());
            wheel.wakers.remove(&id);
        }
    }
}

impl Future for RealSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.forget();
            return Poll::Ready(());
        }
        let Some(shared) = shared() else {
            let deadline = tokio::time::Instant::from_std(self.deadline);
            let sleep = self
                .fallback
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            return sleep.as_mut().poll(cx);
        };
        let mut wheel = shared.wheel.lock().unwrap_or_else(|e| e.into_inner());
        match self.id {
            Some(id) => {
                // Still pending (the thread removes it when it fires): keep the latest waker.
                wheel.wakers.insert(id, cx.waker().clone());
            }
            None => {
                let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
                let earliest = wheel
                    .heap
                    .peek()
                    .is_none_or(|Reverse((first, _))| self.deadline < *first);
                wheel.heap.push(Reverse((self.deadline, id)));
                wheel.wakers.insert(id, cx.waker().clone());
                drop(wheel);
                self.id = Some(id);
                if earliest {
                    shared.changed.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for RealSleep {
    fn drop(&mut self) {
        self.forget();
    }
}

/// hyper's timer on [`RealSleep`]: HTTP/2 PINGs and the pool's idle timeout in real time.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealTimer;

/// A [`RealSleep`] as hyper's `Sleep`.
struct HyperSleep(RealSleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for RealTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(RealSleep::new(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(RealSleep::until(deadline)))
    }
}

/// `future`, or `Err(())` once `bound` has passed in real time.
pub(crate) async fn timeout<F: Future>(bound: Duration, future: F) -> Result<F::Output, ()> {
    let future = std::pin::pin!(future);
    let sleep = std::pin::pin!(RealSleep::new(bound));
    match futures::future::select(future, sleep).await {
        futures::future::Either::Left((output, _)) => Ok(output),
        futures::future::Either::Right(((), _)) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_paused_tokio_clock_does_not_make_it_fire_early() {
        let started = Instant::now();
        let tokio_started = tokio::time::Instant::now();
        // Meanwhile tokio's paused clock jumps by an hour whenever the runtime idles.
        let jumper = tokio::spawn(async {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
        });
        RealSleep::new(Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(
            tokio_started.elapsed() >= Duration::from_secs(3600),
            "tokio's clock did jump meanwhile"
        );
        jumper.abort();
    }

    #[tokio::test]
    async fn sleeps_fire_in_deadline_order_and_dropped_ones_never() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, ms) in [(0, 60u64), (1, 20), (2, 40)] {
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                RealSleep::new(Duration::from_millis(ms)).await;
                order.lock().unwrap().push(i);
            }));
        }
        // One dropped before its deadline.
        drop(RealSleep::new(Duration::from_millis(10)));
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![1, 2, 0]);
    }

    #[tokio::test]
    async fn a_reset_sleep_fires_at_its_new_deadline() {
        let started = Instant::now();
        let mut sleep = RealSleep::new(Duration::from_secs(3600));
        // Registered with the thread, then moved.
        assert!(
            futures::poll!(std::pin::Pin::new(&mut sleep)).is_pending(),
            "an hour away"
        );
        sleep.reset(started + Duration::from_millis(30));
        sleep.await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(30) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn timeout_gives_up_in_real_time() {
        assert_eq!(timeout(Duration::from_secs(5), async { 7 }).await, Ok(7));
        let never = std::future::pending::<()>();
        assert_eq!(timeout(Duration::from_millis(20), never).await, Err(()));
    }
}

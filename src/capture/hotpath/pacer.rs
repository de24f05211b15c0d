//! The paced wake-up of the hot path's sockets, and the kernel's receive time of their bytes.
//!
//! A recorder that wakes for every SSE event pays a context switch per event: a real server
//! writes each token's chunk as it is decoded, so at 256 streams of 50 tokens/s the events
//! arrive one TCP segment at a time, 12,800 times a second, and a thread woken per segment
//! spends most of its CPU in the scheduler (BENCHMARKS.md, "recorder fidelity"). Here the
//! recorder's sockets are kept out of the async runtime's reactor, in an epoll set of their
//! own (edge-triggered) that a [`Pacer`] task looks at once every [`PERIOD`], on the runtime's
//! own timer: one wake-up of the runtime per period reads every stream that received
//! something since the last one. Writes are not paced (a request is written when its task
//! sends it); only a full socket buffer parks a write until the next look. The end of a
//! server's stream (its FIN, `EPOLLRDHUP`) is remembered, not only reported: after it the
//! socket's reads never wait, since it may have come in the same edge as the bytes a read
//! already took.
//!
//! Waking late must not make the recorded times late, so every socket has `SO_TIMESTAMPNS`
//! on and every read takes the kernel's software receive timestamp of the newest segment it
//! copied ([`recv_stamped`]): the time the bytes entered this host's network stack, converted
//! from `CLOCK_REALTIME` to `CLOCK_MONOTONIC` at the read. An event framed from bytes of one
//! read is stamped with that read's time, which is never earlier than its own bytes' arrival
//! and later by at most the gap to the newest segment of the same read (segments a server
//! wrote within one period). Where the kernel gives no timestamp (the option refused, a
//! segment without one), the pacer stops pacing for the rest of its run and wakes on every
//! readiness of the set instead, and the read's own clock reading is the stamp, as it was
//! before pacing: fidelity first, CPU second.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use crate::clock::monotonic_ns;

/// How often the pacer looks at the sockets while any is registered. Each event's time comes
/// from the kernel, so the period costs no fidelity; it bounds how long a completed response
/// waits to be noticed (and so the closed loop's next send: on average half a period).
pub const PERIOD: Duration = Duration::from_millis(1);

/// Most readiness events taken from the epoll set per look.
const EVENTS_PER_LOOK: usize = 1024;

/// One socket's place in the pacer: who waits to read or write, and readiness seen while
/// nobody waited.
#[derive(Default)]
struct Slot {
    generation: u32,
    in_use: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
    read_ready: bool,
    write_ready: bool,
    /// The peer's FIN (or the connection's end) was reported: every later read returns at
    /// once, so a read never waits for the pacer again (see [`Registration::park`]).
    read_closed: bool,
}

#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

/// What the pacer task, its handles and the registrations share.
struct Shared {
    epfd: OwnedFd,
    slots: Mutex<Slots>,
    /// Sockets in the set: the task ticks only while there are some.
    registered: AtomicUsize,
    /// Some socket gave no kernel timestamp: wake on every readiness instead of ticking.
    reactive: AtomicBool,
    /// Every handle is gone: the task ends.
    closed: AtomicBool,
    /// Wakes the task out of its idle wait (a registration, the switch to reactive, the end).
    nudge: Notify,
}

/// The pacer of one run's workers: cheap to clone; the task it started ends when the last
/// clone is dropped.
#[derive(Clone)]
pub struct Pacer {
    owner: Arc<Owner>,
}

struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Relaxed);
        self.0.nudge.notify_one();
    }
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.owner.0;
        f.debug_struct("Pacer")
            .field("registered", &s.registered.load(Ordering::Relaxed))
            .field("reactive", &s.reactive.load(Ordering::Relaxed))
            .finish()
    }
}

fn epoll_key(index: usize, generation: u32) -> u64 {
    (u64::from(generation) << 32) | index as u64
}

/// The epoll set's descriptor, borrowed for the runtime's reactor (in reactive mode).
struct SetFd(RawFd);

impl AsRawFd for SetFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Pacer {
    /// A new epoll set and its task on the current runtime. Must be called inside a tokio
    /// runtime with time and I/O enabled.
    pub fn start() -> io::Result<Pacer> {
        // SAFETY: epoll_create1 takes flags only; the returned descriptor is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Arc::new(Shared {
            epfd,
            slots: Mutex::new(Slots::default()),
            registered: AtomicUsize::new(0),
            reactive: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            nudge: Notify::new(),
        });
        tokio::spawn(run(shared.clone()));
        Ok(Pacer {
            owner: Arc::new(Owner(shared)),
        })
    }

    /// Put `fd` in the set (edge-triggered, read and write) with kernel receive timestamps on;
    /// the registration takes it out.
    pub(super) fn register(&self, fd: RawFd) -> io::Result<Registration> {
        let shared = &self.owner.0;
        let (index, generation) = {
            let mut s = shared.slots.lock().unwrap_or_else(|e| e.into_inner());
            let index = match s.free.pop() {
                Some(i) => i,
                None => {
                    s.slots.push(Slot::default());
                    s.slots.len() - 1
                }
            };
            let slot = &mut s.slots[index];
            slot.generation = slot.generation.wrapping_add(1);
            slot.in_use = true;
            slot.reader = None;
            slot.writer = None;
            // The first read or write is tried before anything waits.
            slot.read_ready = true;
            slot.write_ready = true;
            slot.read_closed = false;
            (index, slot.generation)
        };
        let mut registration = Registration {
            shared: shared.clone(),
            index,
            fd,
            in_set: false,
        };
        if !enable_rx_timestamps(fd) {
            registration.timestamps_missing();
        }
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: epoll_key(index, generation),
        };
        // SAFETY: `ev` is a valid epoll_event; both descriptors are open.
        let rc =
            unsafe { libc::epoll_ctl(shared.epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        registration.in_set = true;
        if shared.registered.fetch_add(1, Ordering::Relaxed) == 0 {
            shared.nudge.notify_one();
        }
        Ok(registration)
    }
}

/// The pacer task: while sockets are registered, look at the set once per [`PERIOD`] and wake
/// the tasks whose sockets became ready; in reactive mode, look whenever the set is ready.
async fn run(shared: Arc<Shared>) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_LOOK];
    let mut wake = Vec::with_capacity(64);
    let mut ticks = Ticks::new();
    let mut reactor: Option<AsyncFd<SetFd>> = None;
    loop {
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        if shared.reactive.load(Ordering::Relaxed) {
            let afd = match &reactor {
                Some(a) => a,
                // SAFETY: the set's descriptor stays open while `shared` lives, which is longer
                // than `reactor` (both locals of this task, `reactor` dropped first).
                None => match unsafe {
                    AsyncFd::register_with_interest(
                        SetFd(shared.epfd.as_raw_fd()),
                        tokio::io::Interest::READABLE,
                    )
                } {
                    Ok(a) => reactor.insert(a),
                    // Without the reactor, keep ticking: late stamps beat lost events.
                    Err(_) => {
                        ticks.tick().await;
                        look(&shared, &mut events, &mut wake);
                        continue;
                    }
                },
            };
            tokio::select! {
                r = afd.readable() => if let Ok(mut g) = r { g.clear_ready() },
                () = shared.nudge.notified() => {}
            }
        } else if shared.registered.load(Ordering::Relaxed) == 0 {
            shared.nudge.notified().await;
            ticks.reset();
            continue;
        } else {
            ticks.tick().await;
        }
        look(&shared, &mut events, &mut wake);
    }
}

/// The pacer's period, kept by a ring of timers one period apart: when one fires it is
/// re-armed one period after the last of the others.
///
/// tokio's timer driver wakes its own thread (an eventfd write, then a park that returns at
/// once) whenever a timer is armed earlier than the earliest one its wheel held when it last
/// fired timers. With one timer (`tokio::time::interval`) the wheel is empty after each tick,
/// so re-arming it is always earliest: a wasted wake-up and two system calls every period.
/// With the others still armed, re-arming is never earliest. Two timers are not enough: a
/// wake-up that comes more than a period late (the driver parks in whole milliseconds) finds
/// both due, and about one tick in ten re-armed an empty wheel (the unit test's count). A
/// thread one or two periods behind finds the next timers already due: they fire at once,
/// one look each. A thread further behind starts the ring again from now, as
/// `MissedTickBehavior::Delay` does.
struct Ticks {
    timers: [Pin<Box<Sleep>>; TICK_TIMERS],
    /// The timer that fires next.
    next: usize,
}

/// The timers of [`Ticks`]' ring.
const TICK_TIMERS: usize = 3;

impl Ticks {
    fn new() -> Ticks {
        let now = Instant::now();
        let mut ticks = Ticks {
            timers: std::array::from_fn(|_| Box::pin(tokio::time::sleep_until(now))),
            next: 0,
        };
        ticks.reset();
        ticks
    }

    /// Start the ring again from now: every timer armed (not only created), one period apart.
    fn reset(&mut self) {
        let now = Instant::now();
        let mut deadline = now;
        for timer in &mut self.timers {
            deadline += PERIOD;
            timer.as_mut().reset(deadline);
        }
        self.next = 0;
    }

    async fn tick(&mut self) {
        let fired = self.next;
        self.timers[fired].as_mut().await;
        let last = self.timers[(fired + TICK_TIMERS - 1) % TICK_TIMERS].deadline();
        if last + PERIOD <= Instant::now() {
            self.reset();
            return;
        }
        self.timers[fired].as_mut().reset(last + PERIOD);
        self.next = (fired + 1) % TICK_TIMERS;
    }
}

/// Take the set's readiness without waiting and wake whoever waits for it.
fn look(shared: &Shared, events: &mut [libc::epoll_event], wake: &mut Vec<Waker>) {
    // SAFETY: `events` has room for its length; the set outlives the call.
    let n = unsafe {
        libc::epoll_wait(
            shared.epfd.as_raw_fd(),
            events.as_mut_ptr(),
            events.len() as i32,
            0,
        )
    };
    if n <= 0 {
        return;
    }
    {
        let mut slots = shared.slots.lock().unwrap_or_else(|e| e.into_inner());
        for ev in &events[..n as usize] {
            let (key, flags) = (ev.u64, ev.events);
            let (index, generation) = ((key & 0xffff_ffff) as usize, (key >> 32) as u32);
            let Some(slot) = slots.slots.get_mut(index) else {
                continue;
            };
            if !slot.in_use || slot.generation != generation {
                continue;
            }
            let hangup = flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            // Sticky, unlike `read_ready`: a FIN reported in the same edge as the last bytes
            // raises no edge of its own after a read took those bytes.
            slot.read_closed |= flags & (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32 != 0;
            if hangup || flags & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
                match slot.reader.take() {
                    Some(w) => wake.push(w),
                    None => slot.read_ready = true,
                }
            }
            if hangup || flags & libc::EPOLLOUT as u32 != 0 {
                match slot.writer.take() {
                    Some(w) => wake.push(w),
                    None => slot.write_ready = true,
                }
            }
        }
    }
    for w in wake.drain(..) {
        w.wake();
    }
    // A full set may hold more: the next look takes them (edge-triggered readiness stays
    // queued until taken).
}

/// Which way a socket waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    Read,
    Write,
}

/// A socket's membership of the pacer's set; dropping it takes the socket out.
pub(super) struct Registration {
    shared: Arc<Shared>,
    index: usize,
    fd: RawFd,
    in_set: bool,
}

impl Registration {
    /// After a read or write found the socket not ready (or a read took less than it was
    /// offered): wait for the pacer, unless readiness arrived since (then `false`: try again
    /// at once).
    ///
    /// A read never waits once the peer's FIN was reported. The FIN often arrives with the
    /// last bytes, in the same edge: the pacer reports it once, a read takes the bytes, and
    /// the end of stream then raises no further edge; a reader that waited after that short
    /// read would wait until a timeout ended its request (a close-delimited body would never
    /// end). After the FIN the socket never blocks again (a read returns bytes, 0 or an
    /// error), so not waiting costs nothing.
    pub(super) fn park(&self, dir: Direction, waker: &Waker) -> bool {
        let mut s = self.shared.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = s.slots.get_mut(self.index) else {
            return false;
        };
        if dir == Direction::Read && slot.read_closed {
            return false;
        }
        let (ready, waiter) = match dir {
            Direction::Read => (&mut slot.read_ready, &mut slot.reader),
            Direction::Write => (&mut slot.write_ready, &mut slot.writer),
        };
        if std::mem::take(ready) {
            return false;
        }
        match waiter {
            Some(w) if w.will_wake(waker) => {}
            _ => *waiter = Some(waker.clone()),
        }
        true
    }

    /// No kernel timestamp came with received bytes: the pacer stops pacing.
    pub(super) fn timestamps_missing(&self) {
        if !self.shared.reactive.swap(true, Ordering::Relaxed) {
            self.shared.nudge.notify_one();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.in_set {
            // SAFETY: removing a descriptor from the set; a null event is allowed for DEL.
            unsafe {
                libc::epoll_ctl(
                    self.shared.epfd.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    self.fd,
                    std::ptr::null_mut(),
                );
            }
            self.shared.registered.fetch_sub(1, Ordering::Relaxed);
        }
        let mut s = self.shared.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = s.slots.get_mut(self.index) {
            slot.in_use = false;
            slot.reader = None;
            slot.writer = None;
            s.free.push(self.index);
        }
    }
}

/// Turn on the kernel's software receive timestamps (`SO_TIMESTAMPNS`) for `fd`.
fn enable_rx_timestamps(fd: RawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt(2) with a c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// What one non-blocking `recvmsg` gave.
pub(super) enum Received {
    /// `n` bytes (0: end of stream), and the `CLOCK_MONOTONIC` time of the newest segment
    /// among them if the kernel stamped it.
    Bytes { n: usize, arrived_ns: Option<i64> },
    /// Nothing to read now.
    WouldBlock,
}

/// Read up to `len` bytes into `dst` without blocking, with the kernel's receive time.
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes.
pub(super) unsafe fn recv_stamped(fd: RawFd, dst: *mut u8, len: usize) -> io::Result<Received> {
    // Room for one SCM_TIMESTAMPNS control message (a timespec), 8-byte aligned.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: dst.cast::<libc::c_void>(),
        iov_len: len,
    };
    // SAFETY: an all-zero msghdr is a valid empty header; the pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    msg.msg_controllen = std::mem::size_of_val(&control);
    loop {
        // SAFETY: `msg` points at `iov` (valid for `len` bytes by the caller's promise) and at
        // `control`, both alive for the call.
        let n = unsafe { libc::recvmsg(fd, &raw mut msg, libc::MSG_DONTWAIT) };
        if n >= 0 {
            let arrived_ns = if n > 0 {
                // SAFETY: `msg` was filled by recvmsg; its control buffer is `control`.
                unsafe { rx_timestamp(&msg) }
            } else {
                None
            };
            return Ok(Received::Bytes {
                n: n as usize,
                arrived_ns,
            });
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(Received::WouldBlock),
            _ => return Err(e),
        }
    }
}

/// The SCM_TIMESTAMPNS control message of `msg`, as `CLOCK_MONOTONIC` nanoseconds.
///
/// # Safety
///
/// `msg` must be a header filled by `recvmsg`, its control buffer still alive.
unsafe fn rx_timestamp(msg: &libc::msghdr) -> Option<i64> {
    // SAFETY: walking the control messages recvmsg wrote, with the libc macros.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                return Some(realtime_to_monotonic(
                    ts.tv_sec * 1_000_000_000 + ts.tv_nsec,
                ));
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// A `CLOCK_REALTIME` instant of the recent past as `CLOCK_MONOTONIC`, by the two clocks'
/// offset now (read back to back; a wall-clock step between the arrival and now would move
/// it, so the result is clamped to now).
fn realtime_to_monotonic(realtime_ns: i64) -> i64 {
    let mono = monotonic_ns();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let real = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
    (mono - (real - realtime_ns)).min(mono)
}

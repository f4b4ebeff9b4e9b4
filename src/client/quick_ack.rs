//! Agent connections that acknowledge answers at once, where the agent
//! needs it.
//!
//! Jolokia 2.x's JVM agent (the JDK HTTP server) keeps connections alive
//! and writes a chunked answer in pieces with Nagle's algorithm on: its
//! last piece waits until the previous one is acknowledged. Linux delays
//! that acknowledgement by up to 40 ms on a connection it judges
//! interactive, which a kept-alive request/answer connection soon is, so
//! every answer stalled 44 ms. Turning `TCP_QUICKACK` on after every read
//! and write sends the acknowledgement now, so connections stay reusable
//! (no connect per request, no TLS handshake per request, no pressure on
//! the agent's small accept backlog). The flag is not sticky in Linux,
//! hence once per read and write.
//!
//! Agents that write an answer whole (Jolokia 1.x in a servlet container,
//! a proxy) never stall, and for them those two `setsockopt` calls and
//! the extra acknowledgement packet were a tenth of the gateway's CPU per
//! proxied read. So a connection starts without them, and the client
//! turns them on ([`QuickAck::note_answer`]) when it sees an answer's body
//! arrive long after its head: from then on for every connection to that
//! agent's address. The first stalled answer costs its 40 ms once.

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Agent connections open right now, in the whole process (a probe's own
/// one-shot connection aside): each holds a file descriptor and buffers
/// while its pool keeps it, so `server.max_kept_agent_connections` is
/// checked against it. Process-wide like the descriptors it counts: the
/// pools of a fleet replaced by a reload still hold theirs.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// See [`OPEN`].
pub fn open_connections() -> usize {
    OPEN.load(Ordering::Relaxed)
}

/// One connection in [`OPEN`], for as long as it lives.
struct Counted;

impl Counted {
    fn new() -> Counted {
        OPEN.fetch_add(1, Ordering::Relaxed);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A small answer whose body ends this long after its head was held
/// back by a delayed acknowledgement (Linux delays up to 40 ms).
const STALL: Duration = Duration::from_millis(30);
/// Larger answers may simply take long to produce or to send.
const SMALL_ANSWER_BYTES: usize = 64 * 1024;

/// `HttpConnector` whose connections acknowledge at once, for the agent
/// addresses seen to stall.
#[derive(Clone)]
pub(super) struct QuickAckConnector {
    tcp: HttpConnector,
    /// `host:port` of every agent seen to stall (only those: a fleet of
    /// agents that don't costs nothing here).
    stalling: Arc<Mutex<HashSet<String>>>,
}

impl QuickAckConnector {
    pub(super) fn new(tcp: HttpConnector) -> QuickAckConnector {
        QuickAckConnector {
            tcp,
            stalling: Arc::default(),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Connecting = Pin<Box<dyn Future<Output = Result<QuickAckStream, BoxError>> + Send>>;

impl tower::Service<Uri> for QuickAckConnector {
    type Response = QuickAckStream;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let address = format!(
            "{}:{}",
            dst.host().unwrap_or_default(),
            dst.port_u16().unwrap_or_default()
        );
        let stalling = self.stalling.clone();
        let connecting = self.tcp.call(dst);
        Box::pin(async move {
            let io = connecting.await?;
            let on = stalling
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&address);
            Ok(QuickAckStream {
                _counted: Counted::new(),
                io,
                switch: QuickAck(Arc::new(Switch {
                    on: AtomicBool::new(on),
                    address,
                    stalling,
                })),
            })
        })
    }
}

/// A connection's quick-ack switch; hyper hands a clone to every answer
/// received on the connection (`Connected::extra`), so the client can
/// turn it on.
#[derive(Clone)]
pub(crate) struct QuickAck(Arc<Switch>);

struct Switch {
    on: AtomicBool,
    address: String,
    stalling: Arc<Mutex<HashSet<String>>>,
}

impl QuickAck {
    /// Called with the time from an answer's head to the end of its body:
    /// a small answer that long in coming stalled on a delayed
    /// acknowledgement, so this connection and every later one to the
    /// same address acknowledge at once.
    pub(crate) fn note_answer(&self, head_to_end: Duration, body_bytes: usize) {
        if head_to_end < STALL || body_bytes > SMALL_ANSWER_BYTES {
            return;
        }
        let switch = &self.0;
        if switch.on.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut stalling = switch
            .stalling
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if stalling.insert(switch.address.clone()) {
            tracing::debug!(
                agent = %switch.address,
                stalled_ms = head_to_end.as_millis() as u64,
                "agent held an answer back for a delayed acknowledgement; its connections now acknowledge at once (TCP_QUICKACK)"
            );
        }
    }

    fn is_on(&self) -> bool {
        self.0.on.load(Ordering::Relaxed)
    }
}

/// A TCP connection to an agent; see the module documentation.
pub(super) struct QuickAckStream {
    io: TokioIo<TcpStream>,
    switch: QuickAck,
    _counted: Counted,
}

impl QuickAckStream {
    fn quick_ack(&self) {
        #[cfg(target_os = "linux")]
        {
            if self.switch.is_on() {
                // A failure only costs the delay this avoids.
                let _ = socket2::SockRef::from(self.io.inner()).set_tcp_quickack(true);
            }
        }
    }
}

impl Read for QuickAckStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            this.quick_ack();
        }
        read
    }
}

impl Write for QuickAckStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(_)) = written {
            // Sending right after receiving makes Linux call the
            // connection interactive and delay acknowledgements again.
            this.quick_ack();
        }
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(_)) = written {
            this.quick_ack();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl Connection for QuickAckStream {
    fn connected(&self) -> Connected {
        self.io.connected().extra(self.switch.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(stalling: &Arc<Mutex<HashSet<String>>>) -> QuickAck {
        QuickAck(Arc::new(Switch {
            on: AtomicBool::new(false),
            address: "agent:8778".into(),
            stalling: stalling.clone(),
        }))
    }

    #[test]
    fn only_a_small_answer_held_back_turns_quick_acks_on() {
        let stalling = Arc::default();
        let q = switch(&stalling);
        q.note_answer(Duration::from_millis(2), 300);
        // A large answer may just take long to send.
        q.note_answer(Duration::from_millis(200), SMALL_ANSWER_BYTES + 1);
        assert!(!q.is_on());
        assert!(stalling.lock().unwrap().is_empty());
        q.note_answer(Duration::from_millis(41), 300);
        assert!(q.is_on());
        // Later connections to the same address start with it on.
        assert!(stalling.lock().unwrap().contains("agent:8778"));
    }
}

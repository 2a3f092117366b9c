//! The daemon's unit tests: the listening socket here; the whole of `run`, in-process, in `run.rs`.

mod run;

use super::*;

/// Every accepted connection inherits the listening socket's receive buffer (Linux caps the asked-for
/// size at `net.core.rmem_max`, doubles it and reports the doubled one); 0 leaves the kernel's
/// default, which autotuning then grows.
#[test]
fn accepted_connections_inherit_the_receive_buffer() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async {
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(usize::MAX);
        let capped = 2 * (256 * 1024).min(rmem_max);
        for (asked, expected) in [(256 * 1024, Some(capped)), (0, None)] {
            let listener = listen("127.0.0.1:0".parse().unwrap(), asked).unwrap();
            let addr = listener.local_addr().unwrap();
            let client = tokio::net::TcpStream::connect(addr);
            let (accepted, _client) = tokio::join!(listener.accept(), client);
            let (accepted, _) = accepted.unwrap();
            let size = tokio::net::TcpSocket::from_std_stream(accepted.into_std().unwrap())
                .recv_buffer_size()
                .unwrap() as usize;
            match expected {
                Some(bytes) => assert_eq!(size, bytes, "asked {asked}"),
                None => assert_ne!(size, capped, "the kernel's default"),
            }
        }
    });
}

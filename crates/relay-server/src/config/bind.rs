//! `bind` (and `RELAY_BIND`): an IP address and port, or a host name and port resolved once at
//! start-up (`localhost:7711`), with a message saying to use an IP when the name does not resolve.

use std::net::{SocketAddr, ToSocketAddrs};

use serde::{Deserialize, Deserializer};

/// `text` as the address to listen on: IPv4 first when a name resolves to both families, as
/// `localhost` usually does and as clients try it.
pub fn resolve(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let help = "use an IP address and port such as 127.0.0.1:7711 (or [::1]:7711)";
    if text
        .rsplit_once(':')
        .is_none_or(|(_, port)| port.parse::<u16>().is_err())
    {
        return Err(format!("`{text}` is not an address with a port: {help}"));
    }
    let found: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{text}` ({e}): {help}"))?
        .collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| found.first())
        .copied()
        .ok_or_else(|| format!("`{text}` resolves to no address: {help}"))
}

/// Serde's side of `resolve`, for the `bind` key.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    resolve(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_addresses_and_resolvable_names() {
        assert_eq!(
            resolve("127.0.0.1:7711").unwrap(),
            "127.0.0.1:7711".parse().unwrap()
        );
        assert_eq!(resolve("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        let local = resolve("localhost:7711").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 7711, "{local}");
        let err = resolve("nowhere").unwrap_err();
        assert!(err.contains("127.0.0.1:7711"), "{err}");
        let err = resolve("no-such-host.invalid:7711").unwrap_err();
        assert!(err.contains("use an IP address"), "{err}");
    }
}

import Testing
import SealedPushWire

/// `HTTPURL`, the strict parser receipt URLs, the outbox's origins and the gateway's configured URLs go through.
@Suite("HTTPURL: strict absolute http(s) URLs")
struct HTTPURLTests {
    @Test("accepted URLs are split into scheme, host, port and path with query", arguments: [
        ("https://push.example.com/r", "https", "push.example.com", nil, "/r", "https://push.example.com:443"),
        ("HTTPS://Example.COM", "https", "example.com", nil, "/", "https://example.com:443"),
        ("http://localhost:8089/r", "http", "localhost", 8089, "/r", "http://localhost:8089"),
        ("http://127.1.2.3/r?x=1", "http", "127.1.2.3", nil, "/r?x=1", "http://127.1.2.3:80"),
        ("http://[::1]:80/r", "http", "[::1]", 80, "/r", "http://[::1]:80"),
        ("https://[FE80::1.2.3.4]/", "https", "[fe80::1.2.3.4]", nil, "/", "https://[fe80::1.2.3.4]:443"),
        ("https://[2001:DB8::1]", "https", "[2001:db8::1]", nil, "/", "https://[2001:db8::1]:443"),
        ("https://a.example?q=1", "https", "a.example", nil, "/?q=1", "https://a.example:443"),
        ("https://a.example:65535/x/y?z=%20", "https", "a.example", 65535, "/x/y?z=%20", "https://a.example:65535"),
        ("https://a.example:00443/", "https", "a.example", 443, "/", "https://a.example:443"),
        ("https://A.Example/Path?Q=Case", "https", "a.example", nil, "/Path?Q=Case", "https://a.example:443"),
    ] as [(String, String, String, Int?, String, String)])
    func accepted(text: String, scheme: String, host: String, port: Int?, pathAndQuery: String, origin: String) throws {
        let url = try #require(HTTPURL(text))
        #expect(url.scheme == scheme)
        #expect(url.host == host)
        #expect(url.port == port)
        #expect(url.pathAndQuery == pathAndQuery)
        #expect(url.origin == origin)
    }

    @Test("anything else is refused", arguments: [
        "", "example.com/r", "ftp://example.com/r", "https:/example.com", "https://", "https:///r", "https://?q",
        "https://user@example.com/r", "https://example.com/r#frag", "https://example.com/r x", "https://exa mple.com",
        "https://example.com/\u{7F}", "https://example.com/\u{E9}", "https://example.com/\t", "https://example.com\r\n/r",
        "https://example.com:/r", "https://example.com:0/r", "https://example.com:65536/r", "https://example.com:123456/r",
        "https://example.com:8o/r", "https://example.com:+80/r", "https://example.com:-1/r", "https://:443/r",
        "https://[::1/r", "https://[]/r", "https://[::1]x/r", "https://[::1]:/r", "https://[::g]/r", "https://[::1]:99999/r",
        "https://example.com:４４３/r", "https://[fe80::1%25eth0]/r",
    ])
    func refused(text: String) {
        #expect(HTTPURL(text) == nil, "\(text.debugDescription)")
    }

    @Test("the loopback test: localhost, 127.0.0.0/8 and [::1]")
    func loopback() throws {
        for text in ["http://localhost/r", "http://127.0.0.1:1/r", "http://127.255.0.9/r", "http://[::1]/r", "https://LOCALHOST/"] {
            #expect(try #require(HTTPURL(text)).isLoopback, "\(text)")
        }
        for text in ["http://128.0.0.1/r", "http://localhost.example/r", "http://[::2]/r", "https://push.example.com/"] {
            #expect(try #require(HTTPURL(text)).isLoopback == false, "\(text)")
        }
    }
}

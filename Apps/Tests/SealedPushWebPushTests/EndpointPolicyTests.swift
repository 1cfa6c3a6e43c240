import Foundation
import SealedPushWebPush
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Web Push endpoint rules (platforms v1 §1.1)")
struct EndpointPolicyTests {
    /// Every endpoint below ends in this capability path: no error message may show it.
    static let secret = "/wpush/v2/SECRET-capability-path"

    enum Expect: Sendable, Equatable {
        case ok(origin: String)
        case refused(WebPushError.EndpointProblem)
    }

    struct Row: CustomTestStringConvertible, Sendable {
        let url: String
        let ports: [Int]
        let allowPrivate: Bool
        let expect: Expect
        init(_ url: String, ports: [Int] = [], allowPrivate: Bool = false, _ expect: Expect) {
            self.url = url
            self.ports = ports
            self.allowPrivate = allowPrivate
            self.expect = expect
        }
        var testDescription: String { "\(url)\(allowPrivate ? " (private allowed)" : "")\(ports.isEmpty ? "" : " ports \(ports)")" }
    }

    static let s = secret
    static let rows: [Row] = [
        // Push services as browsers give them.
        Row("https://fcm.googleapis.com/fcm/send/dXk:APA91b" + s, .ok(origin: "https://fcm.googleapis.com")),
        Row("https://updates.push.services.mozilla.com" + s, .ok(origin: "https://updates.push.services.mozilla.com")),
        Row("https://web.push.apple.com" + s, .ok(origin: "https://web.push.apple.com")),
        Row("https://wns2-by3p.notify.windows.com/w/?token=BQYAAA", .ok(origin: "https://wns2-by3p.notify.windows.com")),
        Row("HTTPS://Push.Example.NET" + s, .ok(origin: "https://push.example.net")),
        Row("https://push.example.net:443" + s, .ok(origin: "https://push.example.net")),
        Row("https://push.example.net", .ok(origin: "https://push.example.net")),
        Row("https://push.example.net?x=1", .ok(origin: "https://push.example.net")),
        Row("https://push_1.example.net" + s, .ok(origin: "https://push_1.example.net")),
        Row("https://xn--psh-5ka.example" + s, .ok(origin: "https://xn--psh-5ka.example")),
        Row("https://push.example.net:8443" + s, ports: [8443], .ok(origin: "https://push.example.net:8443")),
        Row("https://1.2.3.example.net" + s, .ok(origin: "https://1.2.3.example.net")),
        // Length and syntax.
        Row("", .refused(.badLength(length: 0, limit: 2048))),
        Row("https://push.example.net/" + String(repeating: "a", count: 2048), .refused(.badLength(length: 2073, limit: 2048))),
        Row("push.example.net" + s, .refused(.malformed)),
        Row("https:/push.example.net" + s, .refused(.malformed)),
        Row("https://push.example.net/a b" + s, .refused(.malformed)),
        Row("https://push.example.net" + s + "#frag", .refused(.malformed)),
        Row("https://push.example.net\\@evil.example" + s, .refused(.malformed)),
        Row("https://püsh.example" + s, .refused(.malformed)),
        Row("https://push.example.net\t" + s, .refused(.malformed)),
        Row("1https://push.example.net" + s, .refused(.malformed)),
        // Scheme.
        Row("http://push.example.net" + s, .refused(.notHTTPS)),
        Row("wss://push.example.net" + s, .refused(.notHTTPS)),
        Row("http://127.0.0.1:8080" + s, allowPrivate: true, .refused(.notHTTPS)),
        // User information.
        Row("https://user:pass@push.example.net" + s, .refused(.userinfo)),
        Row("https://@push.example.net" + s, .refused(.userinfo)),
        Row("https://push.example.net@127.0.0.1" + s, allowPrivate: true, .refused(.userinfo)),
        // Hosts.
        Row("https://" + s, .refused(.invalidHost)),
        Row("https://:443" + s, .refused(.invalidHost)),
        Row("https://push..example.net" + s, .refused(.invalidHost)),
        Row("https://push.example.net." + s, .refused(.invalidHost)),
        Row("https://localhost." + s, .refused(.invalidHost)),
        Row("https://.push.example.net" + s, .refused(.invalidHost)),
        Row("https://pu%73h.example.net" + s, .refused(.invalidHost)),
        Row("https://%31%32%37.0.0.1" + s, .refused(.invalidHost)),
        Row("https://" + String(repeating: "a", count: 64) + ".example" + s, .refused(.invalidHost)),
        Row("https://push.123" + s, .refused(.invalidHost)),
        Row("https://999.1.1.1" + s, .refused(.invalidHost)),
        Row("https://4294967296" + s, .refused(.invalidHost)),
        Row("https://[fe80::1%25eth0]" + s, .refused(.invalidHost)),
        Row("https://[::1" + s, .refused(.invalidHost)),
        Row("https://[]" + s, .refused(.invalidHost)),
        Row("https://::1" + s, .refused(.invalidHost)),
        // IP literals, in every form resolvers and browsers read.
        Row("https://127.0.0.1" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://127.1" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://2130706433" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://0x7f.1" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://0X7F.0.0.1" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://017700000001" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://0177.0.0.01" + s, .refused(.ipLiteral(origin: "https://127.0.0.1"))),
        Row("https://10.1.2.3:443" + s, .refused(.ipLiteral(origin: "https://10.1.2.3"))),
        Row("https://8.8.8.8" + s, .refused(.ipLiteral(origin: "https://8.8.8.8"))),
        Row("https://0x" + s, .refused(.ipLiteral(origin: "https://0.0.0.0"))),
        Row("https://[::1]" + s, .refused(.ipLiteral(origin: "https://[::1]"))),
        Row("https://[::FFFF:127.0.0.1]:8443" + s, .refused(.ipLiteral(origin: "https://[::ffff:127.0.0.1]:8443"))),
        Row("https://[2606:4700:4700::1111]" + s, .refused(.ipLiteral(origin: "https://[2606:4700:4700::1111]"))),
        // localhost names.
        Row("https://localhost" + s, .refused(.localhost(origin: "https://localhost"))),
        Row("https://LOCALHOST:443" + s, .refused(.localhost(origin: "https://localhost"))),
        Row("https://push.localhost" + s, .refused(.localhost(origin: "https://push.localhost"))),
        // Ports.
        Row("https://push.example.net:8443" + s, .refused(.portNotAllowed(origin: "https://push.example.net:8443", port: 8443))),
        Row("https://push.example.net:8443" + s, ports: [9443], .refused(.portNotAllowed(origin: "https://push.example.net:8443", port: 8443))),
        Row("https://push.example.net:0" + s, .refused(.malformed)),
        Row("https://push.example.net:65536" + s, .refused(.malformed)),
        Row("https://push.example.net:" + s, .refused(.malformed)),
        Row("https://push.example.net:+443" + s, .refused(.malformed)),
        Row("https://[::1]x" + s, allowPrivate: true, .refused(.malformed)),
        // allow_private_endpoints lifts the host, port and address rules.
        Row("https://127.0.0.1:8443" + s, allowPrivate: true, .ok(origin: "https://127.0.0.1:8443")),
        Row("https://127.1:8443" + s, allowPrivate: true, .ok(origin: "https://127.0.0.1:8443")),
        Row("https://localhost:9443" + s, allowPrivate: true, .ok(origin: "https://localhost:9443")),
        Row("https://[::1]:8443" + s, allowPrivate: true, .ok(origin: "https://[::1]:8443")),
        Row("https://push.internal:1234" + s, allowPrivate: true, .ok(origin: "https://push.internal:1234")),
    ]

    @Test(arguments: rows)
    func endpoints(_ row: Row) throws {
        let policy = WebPushEndpointPolicy(allowPorts: row.ports, allowPrivateEndpoints: row.allowPrivate)
        switch row.expect {
        case let .ok(origin):
            let endpoint = try policy.check(row.url)
            #expect(endpoint.origin == origin)
            #expect(endpoint.url == row.url)
            #expect(!endpoint.description.contains("SECRET"))
            #expect(WebPushEndpointPolicy.origin(of: row.url) == origin)
        case let .refused(problem):
            let error = #expect(throws: WebPushError.self) { try policy.check(row.url) }
            #expect(error == .endpoint(problem))
            let text = error?.description ?? ""
            #expect(!text.contains("SECRET"), "the message shows the path: \(text)")
            #expect(text.hasPrefix("webpush/endpoint "))
        }
    }

    @Test func reasons() {
        #expect(WebPushError.EndpointProblem.ipLiteral(origin: "https://127.0.0.1").reason == "endpoint_not_public")
        #expect(WebPushError.EndpointProblem.localhost(origin: "https://localhost").reason == "endpoint_not_public")
        #expect(WebPushError.EndpointProblem.notPublic(origin: "https://a.example", addressClass: .loopback).reason == "endpoint_not_public")
        #expect(WebPushError.EndpointProblem.malformed.reason == "invalid_endpoint")
        #expect(WebPushError.EndpointProblem.portNotAllowed(origin: "https://a.example:1", port: 1).reason == "invalid_endpoint")
    }

    @Test func origins() {
        #expect(WebPushEndpointPolicy.origin(of: "https://Push.Example.net:443/a/b?c") == "https://push.example.net")
        #expect(WebPushEndpointPolicy.origin(of: "http://push.example.net/a") == nil)
        #expect(WebPushEndpointPolicy.origin(of: "https://u@push.example.net/a") == nil)
        #expect(WebPushEndpointPolicy.isOrigin("https://push.example.net"))
        #expect(WebPushEndpointPolicy.isOrigin("https://push.example.net:8443"))
        #expect(!WebPushEndpointPolicy.isOrigin("https://push.example.net/"))
        #expect(!WebPushEndpointPolicy.isOrigin("https://push.example.net:443"))
    }

    // MARK: Resolved addresses

    /// An address's bytes from its text, through the C library (`inet_pton`), independently of the module.
    static func bytes(_ text: String) -> [UInt8] {
        if text.contains(":") {
            var out = [UInt8](repeating: 0, count: 16)
            precondition(inet_pton(AF_INET6, text, &out) == 1, "bad test address \(text)")
            return out
        }
        var out = [UInt8](repeating: 0, count: 4)
        precondition(inet_pton(AF_INET, text, &out) == 1, "bad test address \(text)")
        return out
    }

    static let addresses: [(String, WebPushAddressClass)] = [
        ("8.8.8.8", .publicAddress), ("1.1.1.1", .publicAddress), ("142.250.74.106", .publicAddress),
        ("0.0.0.0", .unspecified), ("0.1.2.3", .thisNetwork), ("0.255.255.255", .thisNetwork),
        ("10.0.0.1", .privateNetwork), ("10.255.255.255", .privateNetwork), ("11.0.0.1", .publicAddress), ("9.255.255.255", .publicAddress),
        ("100.64.0.1", .sharedAddressSpace), ("100.127.255.255", .sharedAddressSpace), ("100.63.255.255", .publicAddress), ("100.128.0.0", .publicAddress),
        ("127.0.0.1", .loopback), ("127.255.255.254", .loopback),
        ("169.254.169.254", .linkLocal), ("169.253.0.1", .publicAddress),
        ("172.16.0.1", .privateNetwork), ("172.31.255.255", .privateNetwork), ("172.15.255.255", .publicAddress), ("172.32.0.0", .publicAddress),
        ("192.0.0.8", .specialPurpose), ("192.0.1.1", .publicAddress),
        ("192.0.2.1", .documentation), ("198.51.100.7", .documentation), ("203.0.113.9", .documentation),
        ("192.88.99.1", .reserved),
        ("192.168.1.1", .privateNetwork), ("192.169.0.1", .publicAddress),
        ("198.18.0.1", .benchmarking), ("198.19.255.255", .benchmarking), ("198.17.255.255", .publicAddress), ("198.20.0.0", .publicAddress),
        ("224.0.0.1", .multicast), ("239.255.255.250", .multicast), ("223.255.255.255", .publicAddress),
        ("240.0.0.1", .reserved), ("255.255.255.254", .reserved), ("255.255.255.255", .broadcast),
        ("::", .unspecified), ("::1", .loopback),
        ("::ffff:127.0.0.1", .loopback), ("::ffff:10.0.0.1", .privateNetwork), ("::ffff:169.254.1.1", .linkLocal), ("::ffff:8.8.8.8", .publicAddress),
        ("::127.0.0.1", .loopback), ("::192.168.0.1", .privateNetwork), ("::8.8.8.8", .publicAddress),
        ("64:ff9b::7f00:1", .loopback), ("64:ff9b::a9fe:a9fe", .linkLocal), ("64:ff9b::808:808", .publicAddress), ("64:ff9b:1::1", .privateNetwork),
        ("2002:7f00:1::1", .loopback), ("2002:c0a8:101::1", .privateNetwork), ("2002:6440:1::", .sharedAddressSpace), ("2002:808:808::1", .publicAddress),
        ("2001::1", .teredo), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", .teredo),
        ("2001:db8::1", .documentation), ("2001:db8:ffff::1", .documentation), ("3fff::1", .documentation), ("3fff:fff::1", .documentation),
        ("2001:2::1", .benchmarking), ("2001:10::1", .specialPurpose), ("2001:1ff::1", .specialPurpose),
        ("fc00::1", .uniqueLocal), ("fd12:3456::1", .uniqueLocal),
        ("fe80::1", .linkLocal), ("febf::1", .linkLocal), ("fec0::1", .privateNetwork),
        ("ff02::1", .multicast), ("ff0e::1", .multicast),
        ("100::1", .reserved), ("4000::1", .reserved), ("::ffff:0:7f00:1", .reserved), ("1::", .reserved),
        ("2606:4700:4700::1111", .publicAddress), ("2a00:1450:4001:82b::200a", .publicAddress), ("2001:4860:4860::8888", .publicAddress),
        ("2001:200::1", .publicAddress), ("3ffe::1", .publicAddress),
    ]

    @Test func addressClasses() {
        for (text, expected) in Self.addresses {
            #expect(WebPushEndpointPolicy.classify(address: Self.bytes(text)) == expected, "\(text)")
        }
        #expect(WebPushEndpointPolicy.classify(address: []) == .invalid)
        #expect(WebPushEndpointPolicy.classify(address: [1, 2, 3, 4, 5]) == .invalid)
    }

    @Test func resolvedAddressesMustAllBePublic() throws {
        let policy = WebPushEndpointPolicy()
        let origin = "https://push.example.net"
        try policy.checkAddresses([Self.bytes("8.8.8.8"), Self.bytes("2606:4700:4700::1111")], origin: origin)
        #expect(throws: WebPushError.endpoint(.noAddresses(origin: origin))) { try policy.checkAddresses([], origin: origin) }
        let error = #expect(throws: WebPushError.self) {
            try policy.checkAddresses([Self.bytes("8.8.8.8"), Self.bytes("::ffff:127.0.0.1")], origin: origin)
        }
        #expect(error == .endpoint(.notPublic(origin: origin, addressClass: .loopback)))
        // #44 F: no part of the endpoint, its origin included, is quoted.
        #expect(error?.description == "webpush/endpoint resolves to a loopback address, not a public one: the gateway connects to public addresses only")
        try WebPushEndpointPolicy(allowPrivateEndpoints: true).checkAddresses([Self.bytes("127.0.0.1")], origin: "https://localhost:8443")
        #expect(throws: WebPushError.endpoint(.noAddresses(origin: origin))) {
            try WebPushEndpointPolicy(allowPrivateEndpoints: true).checkAddresses([], origin: origin)
        }
    }
}

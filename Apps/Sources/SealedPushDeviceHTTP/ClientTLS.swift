import NIOSSL

extension TLSConfiguration {
    /// The device's HTTPS clients' TLS: the system's roots and certificate checks, TLS 1.2 at least
    /// (NIOSSL's default minimum is TLS 1.0, which no attachment host or receipt collector needs).
    static var sealedPushClient: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        return tls
    }
}

/// The deadlines of every network step toward a Web Push service (platforms v1 §4.1), and how many name lookups
/// one app runs at once. Tests shorten them.
struct WebPushDeadlines: Sendable {
    /// Name resolution: a lookup that has not answered by then is abandoned (not awaited).
    var resolve: Duration = .seconds(5)
    /// The TCP connect and the TLS handshake together.
    var connect: Duration = .seconds(10)
    /// The request, from its first byte written to the last byte of its answer read.
    var request: Duration = .seconds(10)
    /// Name lookups of one app running at once (an abandoned one counts until the resolver returns).
    var lookupsPerApp = 4
}

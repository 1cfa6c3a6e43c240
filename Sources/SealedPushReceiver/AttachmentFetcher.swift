public import SealedPushWire

/// Fetches media objects over HTTP for the attachment pipeline; the extension module has no networking of its own.
///
/// On iOS a `URLSession` implements it (a data task per request, with a delegate that returns `nil` from
/// `willPerformHTTPRedirection` so redirects come back as responses); on Linux `SealedPushDeviceHTTP` does,
/// over AsyncHTTPClient. An implementation never follows a redirect itself: it reports the 3xx status and its
/// `Location`, and the pipeline applies the §4 rules (at most 3 redirects, never to an insecure URL).
/// Cancelling the calling task must stop the request.
public protocol AttachmentFetcher: Sendable {
    /// Sends `GET url` and returns the response head once it arrives, with a stream of the body.
    ///
    /// `maximumBytes` is the most body bytes the caller will read: an implementation may stop reading past it.
    /// Throws for a connection failure (DNS, refused, reset, TLS).
    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse
}

/// The head of an HTTP response and its body.
public struct AttachmentResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The `Content-Length` the server announced, if any.
    public var announcedLength: Int?
    /// The `Location` header of a redirect (absolute or relative), if any.
    public var location: String?
    /// The body, read piece by piece.
    public var body: any AttachmentByteStream

    /// A response from its parts.
    public init(status: Int, announcedLength: Int?, location: String?, body: any AttachmentByteStream) {
        self.status = status
        self.announcedLength = announcedLength
        self.location = location
        self.body = body
    }
}

/// The body of a response, read in order by one task.
public protocol AttachmentByteStream: Sendable {
    /// The next bytes of the body (never empty), or `nil` at its end; throws if the connection failed, and
    /// `AttachmentBodyTooLarge` once the body passed the `maximumBytes` it was fetched with.
    func next() async throws -> [UInt8]?
    /// Stops reading and releases the connection (called when the pipeline gives up early).
    func cancel() async
}

/// Thrown by a body that passed the `maximumBytes` of its `get`: the fetcher stopped the transfer, and the
/// pipeline reports `attachmentTooLarge` (the server sends more than the object can be: a wrong file).
public struct AttachmentBodyTooLarge: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bound the body passed.
    public var limit: Int

    /// The error for a body over `limit` bytes.
    public init(limit: Int) { self.limit = limit }

    /// What happened, and what to do.
    public var description: String {
        "the server sent more than the \(limit) bytes the attachment can be; the sender must point at the encrypted object"
    }
}

extension AttachmentURLPolicy {
    /// `location` resolved against `base`: absolute URLs as they are, `//host/…`, `/path` and relative paths
    /// against the base URL; `nil` if it cannot be resolved.
    public static func resolve(_ location: String, against base: String) -> String? {
        if split(location) != nil { return location }
        guard let (scheme, _) = split(base) else { return nil }
        let schemeEnd = base.index(base.startIndex, offsetBy: scheme.utf8.count + 3)
        let afterScheme = base[schemeEnd...]
        let pathStart = afterScheme.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
        let origin = String(base[..<pathStart])
        if location.hasPrefix("//") { return scheme + ":" + location }
        if location.hasPrefix("/") { return origin + location }
        guard !location.isEmpty else { return nil }
        var path = String(base[pathStart...])
        if let cut = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = String(path[..<cut]) }
        let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? "/"
        return origin + directory + location
    }
}

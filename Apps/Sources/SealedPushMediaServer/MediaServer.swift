public import Hummingbird
public import Logging
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A development HTTP server for encrypted media objects (`sealedpush-server media serve DIR`).
///
/// Serves each file of one directory at `/NAME` (or `/any/prefix/NAME`: only the last path component names
/// the file) with `Content-Length`, as `application/octet-stream`. Names are what `DirectoryMediaStore` makes
/// (letters, digits, `-`, `_`, `.`, never starting with `.`); anything else, including any attempt to leave
/// the directory, is 404. Each request is logged (method, path, status, length), never an object's bytes.
public struct MediaServer: Sendable {
    /// The directory served.
    public let directory: String
    /// The host to bind (a loopback address for development).
    public let host: String
    /// The port to bind; 0 picks a free one (printed once bound).
    public let port: Int
    /// Where requests are logged.
    public let logger: Logger

    /// A server for `directory` on `host:port`.
    public init(directory: String, host: String = "127.0.0.1", port: Int = 8080, logger: Logger) {
        self.directory = directory
        self.host = host
        self.port = port
        self.logger = logger
    }

    /// Whether `name` may name a served object: 1–255 of `A–Z a–z 0–9 - _ .`, not starting with `.`.
    public static func isServableName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...255).contains(bytes.count), bytes[0] != UInt8(ascii: ".") else { return false }
        return bytes.allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x5F || b == 0x2E
        }
    }

    /// The size of the regular file at `path`, or `nil` when there is none (missing, a directory, a device).
    static func regularFileSize(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    /// The application, not yet running; `onRunning` receives the bound address (`127.0.0.1:PORT`).
    public func application(onRunning: @escaping @Sendable (String) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        let directory = self.directory
        let logger = self.logger
        let fileIO = FileIO()
        router.get("**") { request, context -> Response in
            let path = request.uri.path
            let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
            let filePath = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            guard Self.isServableName(name), let size = Self.regularFileSize(filePath) else {
                logger.info("GET \(path) -> 404")
                return Response(status: .notFound)
            }
            let body = try await fileIO.loadFile(path: filePath, context: context)
            logger.info("GET \(path) -> 200 (\(size) bytes)")
            var headers = HTTPFields()
            headers[.contentType] = "application/octet-stream"
            headers[.contentLength] = String(size)
            return Response(status: .ok, headers: headers, body: body)
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                let host = channel.localAddress?.ipAddress ?? "127.0.0.1"
                await onRunning(host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
            },
            logger: logger
        )
    }
}

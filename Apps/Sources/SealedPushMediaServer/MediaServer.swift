public import Hummingbird
public import Logging
import NIOCore
import _NIOFileSystem
import SystemPackage
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
/// the directory, is 404. Only regular files are served, opened without following a symbolic link (a link
/// in the directory pointing elsewhere is 404), and the file streamed is the one checked: opened once more
/// for the body, it must still be the same regular file. Each request is logged (method, path, status,
/// length), never an object's bytes.
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

    /// A file's device and inode numbers, which say whether two opens reached the same file.
    static func identity(_ info: FileInfo) -> (inode: UInt64, device: UInt64)? {
        guard let status = info.platformSpecificStatus else { return nil }
        return (UInt64(truncatingIfNeeded: status.st_ino), UInt64(truncatingIfNeeded: status.st_dev))
    }

    /// The size and identity of the regular file at `path`, opened without following a symbolic link, or
    /// `nil` when there is none (missing, a link, a directory, a device).
    static func regularFile(_ path: String) async -> (size: Int64, inode: UInt64, device: UInt64)? {
        // lstat first: opening a FIFO for reading would block until a writer came.
        var status = stat()
        guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
        return try? await FileSystem.shared.withFileHandle(forReadingAt: FilePath(path),
                                                    options: OpenOptions.Read(followSymbolicLinks: false, closeOnExec: true)) { handle in
            let info = try await handle.info()
            guard info.type == .regular, let id = Self.identity(info) else { return nil }
            return (info.size, id.inode, id.device)
        }
    }

    /// The application, not yet running; `onRunning` receives the bound address (`127.0.0.1:PORT`).
    public func application(onRunning: @escaping @Sendable (String) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        let directory = self.directory
        let logger = self.logger
        router.get("**") { request, context -> Response in
            let path = request.uri.path
            let name = path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
            let filePath = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            guard Self.isServableName(name), let file = await Self.regularFile(filePath) else {
                logger.info("GET \(path) -> 404")
                return Response(status: .notFound)
            }
            let size = file.size
            let body = ResponseBody(contentLength: Int(size)) { writer in
                // Opened again for the body (no descriptor is held by a response that is never written):
                // still no link followed, and it must be the file checked above, or the response is cut.
                try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(filePath),
                                                           options: OpenOptions.Read(followSymbolicLinks: false, closeOnExec: true)) { handle in
                    let info = try await handle.info()
                    guard info.type == .regular, info.size == size, let id = Self.identity(info), id.inode == file.inode,
                          id.device == file.device else { throw HTTPError(.notFound) }
                    if size > 0 {
                        for try await chunk in handle.readChunks(in: 0..<size, chunkLength: .kibibytes(128)) { try await writer.write(chunk) }
                    }
                }
                try await writer.finish(nil)
            }
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

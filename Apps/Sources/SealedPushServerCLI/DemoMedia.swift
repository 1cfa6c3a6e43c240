#if canImport(FoundationEssentials)
import SealedPushCLI
import FoundationEssentials
#else
import Foundation
#endif
import Hummingbird
import Logging
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushKeychain
import SealedPushMediaServer
import SealedPushReceiver
import SealedPushSender
import SealedPushWire

extension Demo {
    /// A 1×1 PNG (a red pixel): what the photo message sends.
    static let tinyPNG: [UInt8] = [
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xDE, 0x00, 0x00, 0x00, 0x0C, 0x49, 0x44, 0x41,
        0x54, 0x08, 0xD7, 0x63, 0xF8, 0xCF, 0xC0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xDD, 0x8D, 0xB0, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ]

    /// The photo message: the server encrypts a small image into a directory that `media serve` serves on
    /// loopback; the device fetches, verifies and decrypts it; then the same with the object tampered on the server.
    mutating func photoMessage(sender: NotificationSender, record: DeviceKeyRecord, store: KeychainStore) async throws {
        heading("A photo message: the server encrypts the image, a media server serves it, the device fetches it")
        let media = base.appendingPathComponent("media").path
        let attachmentsDir = base.appendingPathComponent("attachments").path
        for dir in [media, attachmentsDir] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let photo = base.appendingPathComponent("photo.png").path
        try Data(Self.tinyPNG).write(to: URL(fileURLWithPath: photo))

        let (addresses, continuation) = AsyncStream<String>.makeStream()
        let server = MediaServer(directory: media, host: "127.0.0.1", port: 0, logger: quietLogger)
        let app = server.application {
            continuation.yield($0)
            continuation.finish()
        }
        // `media serve` as a service in a background group, shut down gracefully when this step ends.
        try await BackgroundServices.with([app], logger: quietLogger) {
            var address = ""
            for await a in addresses { address = a; break }
            guard !address.isEmpty else { throw CLIError("demo could not start the media server on 127.0.0.1") }
            note("sealedpush-server media serve \(media) --listen 127.0.0.1:0  →  listening on http://\(address)")

            let mediaStore: DirectoryMediaStore
            do { mediaStore = try DirectoryMediaStore(directory: media, baseURL: "http://\(address)") } catch { throw CLIError(String(describing: error)) }
            func sealPhoto(_ text: String) throws -> [UInt8] {
                var message = SecretMessage(title: "Agent K", body: text)
                do { try message.attach(MediaAttachment(file: photo, name: "photo.png"), to: mediaStore) } catch { throw CLIError(error.description) }
                return try sealOrFail(sender, message, record)
            }
            let fetcher = HTTPAttachmentFetcher()
            let pipeline: AttachmentPipeline
            do { pipeline = try AttachmentPipeline(fetcher: fetcher, directory: attachmentsDir, policy: .development) } catch {
                throw CLIError(String(describing: error))
            }
            let payload = try sealPhoto("Photo of the drop site attached.")
            note("sealedpush seal … --attach photo.png --media-dir media --media-url http://\(address)")
            note("The object on the server is ciphertext (\(try objectSizes(media)) bytes for a \(Self.tinyPNG.count)-byte PNG); its key is in the sealed body.")
            sideBySide(payload, await deliver(payload, store: store, attachments: pipeline))

            heading("The same with the object tampered with on the server: the text still shows")
            let before = Set(try FileManager.default.contentsOfDirectory(atPath: media))
            let second = try sealPhoto("Second photo: this one was tampered with.")
            if let name = try FileManager.default.contentsOfDirectory(atPath: media).first(where: { !before.contains($0) }) {
                let path = media + "/" + name
                var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                bytes[bytes.count / 2] ^= 0x01
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                note("One byte of the stored object changed.")
            }
            sideBySide(second, await deliver(second, store: store, attachments: pipeline))
            try? await fetcher.shutdown()
        }
    }

    /// The sizes of the objects in `media`, in bytes (each file's length as read: FoundationEssentials's
    /// attribute dictionary holds no `BinaryInteger` for `.size`).
    private func objectSizes(_ media: String) throws -> String {
        try FileManager.default.contentsOfDirectory(atPath: media).sorted().map { name in
            String(try Data(contentsOf: URL(fileURLWithPath: media + "/" + name)).count)
        }.joined(separator: ", ")
    }
}

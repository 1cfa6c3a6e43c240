import SealedPushCLI
import SealedPushServerCLI

// `sealedpush-server`: the local APNs, the media server, the receipt collector and the demo.
CommandMain.run(SealedPushServerCommand.self)

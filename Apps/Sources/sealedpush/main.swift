import SealedPushCLI

// `sealedpush`: the light CLI (keys, sender, trust, seal, send, device). It links no HTTP server.
CommandMain.run(SealedPushCommand.self)

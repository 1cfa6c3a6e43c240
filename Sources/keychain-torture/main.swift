print("keychain-torture: not built yet")

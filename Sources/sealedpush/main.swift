print("sealedpush")

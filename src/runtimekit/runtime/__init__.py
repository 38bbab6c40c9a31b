"""The node runtime daemon: GPU backends, allocation, isolation, checkpoint, gRPC service."""

"""The runtime self-test's backends (pyACL, torch_npu) and the child process that runs them."""

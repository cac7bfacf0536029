from kbatch.cli import cmd_compact

# the command functions take parsed values: the clock in epoch ms, not the text the CLI parses
code = cmd_compact("logs/orders-0", now="2024-05-01T00:00:00Z")  # E: arg-type

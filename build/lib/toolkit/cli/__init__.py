"""The command line: every command and option (Click), progress and tables on the terminal, exit codes.
The only code that prints.
May use: every other package.
"""

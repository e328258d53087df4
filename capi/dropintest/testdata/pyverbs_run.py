# Runs rdma-core's test suite (tests/, from python3-pyverbs) as its
# run_tests.py does, printing one line per test: "RESULT <id> <outcome>".
# Copy it into the tests directory and run it from there's parent:
#   python3 tests/pyverbs_run.py --dev rgo0 --gid 1
import os
import sys
import unittest
from importlib.machinery import SourceFileLoader

from args_parser import parser

here = os.path.dirname(os.path.abspath(__file__))
tests = SourceFileLoader('tests', os.path.join(here, '__init__.py')).load_module()
parser.parse_args()


class Result(unittest.TextTestResult):
    def _say(self, test, outcome):
        print('RESULT', test.id(), outcome, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._say(test, 'pass')

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._say(test, 'skip')

    def addError(self, test, err):
        super().addError(test, err)
        self._say(test, 'error')

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._say(test, 'fail')


suite = unittest.defaultTestLoader.loadTestsFromModule(tests)
unittest.TextTestRunner(resultclass=Result, verbosity=0, stream=sys.stderr).run(suite)

"""Run the unittest tests beside this file and write their JUnit XML, which `ab` reads: python run.py OUT.xml.
Exit 1 when one fails, as pytest does. Standard library only."""

import sys
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path


class Result(unittest.TestResult):
    """Every test's outcome, in the order run: (test, status, message)."""

    def __init__(self):
        super().__init__()
        self.cases = []

    def addSuccess(self, test):
        self.cases.append((test, "passed", ""))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.cases.append((test, "failure", str(err[1])))

    def addError(self, test, err):
        super().addError(test, err)
        self.cases.append((test, "error", str(err[1])))

    def addSkip(self, test, reason):
        self.cases.append((test, "skipped", reason))


here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
result = Result()
unittest.defaultTestLoader.discover(str(here), top_level_dir=str(here)).run(result)
root = ET.Element("testsuites")
suite = ET.SubElement(root, "testsuite", name="tinymath", tests=str(len(result.cases)))
for test, status, message in result.cases:
    case = ET.SubElement(suite, "testcase", classname=type(test).__module__ + "." + type(test).__name__,
                         name=test._testMethodName)
    if status != "passed":
        ET.SubElement(case, status, message=message)
Path(sys.argv[1]).write_bytes(ET.tostring(root, encoding="utf-8"))
sys.exit(0 if result.wasSuccessful() else 1)

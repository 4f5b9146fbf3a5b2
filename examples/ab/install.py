"""Install tinymath VERSION (1.0 or 1.1, from the directories beside this file) into the interpreter that runs
this script, with the metadata pip would leave, so `import tinymath` and the stacks' gate find it:

    build/ab-example/control/bin/python examples/ab/install.py 1.0

Standard library only: the example's virtual environments need neither pip nor an index.
"""

import shutil
import sys
import sysconfig
from pathlib import Path

version = sys.argv[1]
source = Path(__file__).resolve().parent / f"tinymath-{version}" / "tinymath"
if not source.is_dir():
    sys.exit(f"install.py: no tinymath {version} beside this script (1.0 or 1.1)")
site = Path(sysconfig.get_paths()["purelib"])
for old in [site / "tinymath", *site.glob("tinymath-*.dist-info")]:
    shutil.rmtree(old, ignore_errors=True)  # an earlier install of either version
shutil.copytree(source, site / "tinymath")
info = site / f"tinymath-{version}.dist-info"
info.mkdir()
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tinymath\nVersion: {version}\n")
(info / "INSTALLER").write_text("install.py\n")
print(f"tinymath {version} in {site}")

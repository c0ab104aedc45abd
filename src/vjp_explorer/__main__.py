"""python -m vjp_explorer"""

from .entry import main

main()

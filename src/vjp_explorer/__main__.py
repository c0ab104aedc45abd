"""python -m vjp_explorer"""

from .cli import main

main()

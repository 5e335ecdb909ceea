from yanami.cli import main

main()

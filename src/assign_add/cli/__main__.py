from assign_add.cli import main

main()

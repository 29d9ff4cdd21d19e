"""What the tests share: fixtures' builders, fakes of the outside world, truth oracles. Test files import from here,
never from each other."""
